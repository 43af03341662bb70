"""The one git helper: every git operation the orchestrator performs goes through here.

Built on GitPython. Agents never call this; their read-only git tools live in
`soda.tools`. Functions take a `Repo` and raise `GitError` (structural) or
`NotAGitRepository` (user) rather than GitPython's exceptions.
"""

from __future__ import annotations

from pathlib import Path

import git
from git import Repo

from soda.errors import NotAGitRepository

SODA_IDENTITY = ("-c", "user.name=soda", "-c", "user.email=soda@localhost")
"""Commits soda makes carry its own name, unless GIT_AUTHOR_* say otherwise."""


def open_repo(path: Path) -> Repo:
    """The git repository containing `path`."""
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


def _is_ignored(repo: Repo, pattern: str) -> bool:
    probe = pattern.rstrip("/") + "/soda.db"
    try:
        repo.git.check_ignore("-q", probe)
    except git.GitCommandError:
        return False
    return True


def init_repo(path: Path, branch: str = "main") -> Repo:
    """A new repository at `path` whose first branch is `branch`."""
    return Repo.init(path, initial_branch=branch)


def commit_all(repo: Repo, message: str) -> str:
    """Stage everything (ignored files excepted) and commit as soda; the new HEAD."""
    repo.git.add("-A")
    repo.git.execute(["git", *SODA_IDENTITY, "commit", "-q", "-m", message])
    return repo.head.commit.hexsha
