"""The one git helper: every git operation the orchestrator performs goes through here.

Built on GitPython. Agents never call this; their read-only git tools live in
`soda.tools`. Functions take a `Repo` and raise `GitError` (structural) or
`NotAGitRepository` (user) rather than GitPython's exceptions.

Hardening. An agent that can write the repository's `.git` could plant a hook
(`post-commit`, `reference-transaction`, ...) or set `core.fsmonitor` /
`core.hooksPath`, and soda's next git command would run it with soda's own
environment, API key included. So every git process soda starts runs with the
options in `HARDENING`, which override repository config: no hooks, no
fsmonitor, no signing or signature checks (`gpg.program` is a program), no
submodule recursion (which could fetch). Two carriers, because soda starts git
two ways: `harden_git_environment` puts them in `GIT_CONFIG_PARAMETERS` (what
`git -c` itself uses to hand options to child gits) for GitPython calls and for
the agents' git tools, whose processes inherit it; `SODA_IDENTITY` carries them
as `-c` options for explicit argv calls, so those are safe even in a process
that never opened a repository through `open_repo`. `GIT_CONFIG_PARAMETERS`, not
`GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`: `soda.system.proc` scrubs variables whose names
contain KEY from children's environments, and a child git given a count without
its keys refuses to start.

Not covered, because config cannot switch them off by name: `diff.external`
(runs only for patch output of `git diff`; soda's own diffs are `--numstat` or
`--raw`, which never call it) and attribute-selected drivers (`filter.<x>.*`,
`diff.<x>.textconv`, `merge.<x>.driver`), which need a `.gitattributes` entry
as well as the config entry.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import MutableMapping
from pathlib import Path

import git
from git import Repo

from soda.errors import NotAGitRepository

HARDENING: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", "/dev/null"),  # hooks are looked up in /dev/null: there are none
    ("core.fsmonitor", "false"),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("merge.verifySignatures", "false"),
    ("log.showSignature", "false"),
    ("submodule.recurse", "false"),
)
"""Options that stop git from running programs the repository's config names."""

HARDENING_ARGS: tuple[str, ...] = tuple(
    arg for key, value in HARDENING for arg in ("-c", f"{key}={value}")
)

SODA_IDENTITY: tuple[str, ...] = (
    *HARDENING_ARGS,
    "-c",
    "user.name=soda",
    "-c",
    "user.email=soda@localhost",
)
"""Options for every explicit git argv soda runs: commits carry soda's own name
(unless GIT_AUTHOR_* say otherwise), and the hardening comes along."""

CONFIG_PARAMETERS = "GIT_CONFIG_PARAMETERS"


def harden_git_environment(environ: MutableMapping[str, str] | None = None) -> None:
    """Add `HARDENING` to `GIT_CONFIG_PARAMETERS` in `environ` (default os.environ).

    Entries already there are kept (ours are appended); an option is appended
    only when the last entry for it does not already say our value, so calling
    this again changes nothing, and a later entry that undid ours is undone."""
    env = os.environ if environ is None else environ
    current = env.get(CONFIG_PARAMETERS, "")
    try:
        entries = shlex.split(current)
    except ValueError:  # unbalanced quotes: git refuses it anyway; ours still go last
        entries = []
    last: dict[str, str | None] = {}
    for entry in entries:
        # Both git formats ('key=value' and 'key'='value') dequote to key=value.
        key, sep, value = entry.partition("=")
        last[key.lower()] = value if sep else None
    missing = [
        _sq_quote(f"{key}={value}") for key, value in HARDENING if last.get(key.lower()) != value
    ]
    if missing:
        env[CONFIG_PARAMETERS] = " ".join(filter(None, [current.strip(), *missing]))


def _sq_quote(text: str) -> str:
    """Quoted as git's sq_quote does; git rejects an entry that is not quoted."""
    return "'" + text.replace("'", "'\\''") + "'"


def open_repo(path: Path) -> Repo:
    """The git repository containing `path`. Hardens the environment first, so
    everything soda runs on the repository from here on ignores its hooks."""
    harden_git_environment()
    try:
        return Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError) as exc:
        raise NotAGitRepository(
            f"{path} is not inside a git repository (run `git init` there first)"
        ) from exc


def ensure_excluded(repo: Repo, pattern: str) -> bool:
    """Make git ignore `pattern` via .git/info/exclude (never a tracked .gitignore).
    Returns True when the file was changed."""
    if _is_ignored(repo, pattern):
        return False
    exclude = Path(repo.git_dir) / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    existing = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
    if pattern in existing.splitlines():
        return False
    prefix = "" if not existing or existing.endswith("\n") else "\n"
    exclude.write_text(f"{existing}{prefix}# soda runtime state\n{pattern}\n", encoding="utf-8")
    return True


def write_ignored(repo: Repo, name: str, text: str) -> Path:
    """`text` at `name` in the work tree, ignored by git (no commit or worktree
    sees it), written only when it differs; its path."""
    path = Path(repo.working_dir) / name
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        ensure_excluded(repo, f"/{name}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return path


def _is_ignored(repo: Repo, pattern: str) -> bool:
    probe = pattern.rstrip("/") + "/soda.db"
    try:
        repo.git.check_ignore("-q", probe)
    except git.GitCommandError:
        return False
    return True


def init_repo(path: Path, branch: str = "main") -> Repo:
    """A new repository at `path` whose first branch is `branch` (hardened like
    `open_repo`)."""
    harden_git_environment()
    return Repo.init(path, initial_branch=branch)


def commit_all(repo: Repo, message: str) -> str:
    """Stage everything (ignored files excepted) and commit as soda; the new HEAD."""
    repo.git.add("-A")
    repo.git.execute(["git", *SODA_IDENTITY, "commit", "-q", "-m", message])
    return repo.head.commit.hexsha
