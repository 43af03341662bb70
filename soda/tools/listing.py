"""What an agent's file tools see of a tree: git's own listing where git governs
the directory (tracked files plus untracked ones .gitignore does not exclude),
the sandboxed walk elsewhere, and the vetting both go through (sandbox checks,
noise directories, only regular files)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from soda.repo.git import HARDENING_ARGS
from soda.system.proc import run
from soda.tools.sandbox import Sandbox

# Not worth an agent's context when listing or searching a whole tree; still
# reachable by naming them as `path`.
NOISE_DIRS = frozenset(
    {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".venv", "node_modules"}
)

GIT_LIST_TIMEOUT_S = 60.0
_GIT_LIST_OUTPUT = 1 << 28
_GIT = ["git", "--no-pager", "--literal-pathspecs", *HARDENING_ARGS]
_GIT_ENV = {"GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0"}


def tree_files(sandbox: Sandbox, start: Path) -> list[Path]:
    """The files under the directory `start` (a real path inside the sandbox) an
    agent should see: git's listing when git governs `start`, else the walk."""
    listed = git_listing(start)
    if listed is None:
        return list(walk(sandbox, start))
    return [start / rel for rel in vetted(sandbox, start, sorted(set(listed)))]


def git_listing(start: Path, *args: str) -> list[str] | None:
    """The entries of `git ls-files -z --cached --others --exclude-standard ARGS` in
    `start`, as git prints them: paths relative to `start` of tracked files plus
    untracked ones .gitignore does not exclude (a path may repeat: an unmerged
    file, or `--modified` in ARGS). With `--stage` the tracked entries carry their
    "MODE BLOB STAGE<tab>" prefix. None when git does not govern `start`: not in a
    checkout, `start` itself ignored, or git failing."""
    if not start.is_dir() or not _git_governs(start):
        return None
    output = _git(start, ["ls-files", "-z", "--cached", "--others", "--exclude-standard", *args])
    if output is None:
        return None
    return [entry for entry in output.split("\0") if entry]


def vetted(sandbox: Sandbox, start: Path, rels: Iterable[str]) -> Iterator[str]:
    """The paths in `rels` (relative to `start`) that are regular files the sandbox
    permits, skipping noise directories. Each directory is checked once through
    the sandbox (symlinks on the way, denied names, soda's state); a symlinked file
    must resolve somewhere permitted; FIFOs, sockets and devices are dropped;
    paths git lists but the tree no longer has (deleted, or a nested repository
    shown as `dir/`) are dropped too."""
    permitted: dict[str, bool] = {}
    for rel in rels:
        parent, _, name = rel.rpartition("/")
        if not name or name.casefold() in sandbox.deny:
            continue
        allowed = permitted.get(parent)
        if allowed is None:
            directory = start / parent if parent else start
            allowed = not NOISE_DIRS.intersection(parent.split("/")) and sandbox.permits(directory)
            permitted[parent] = allowed
        if not allowed:
            continue
        try:
            mode = os.lstat(os.path.join(start, rel)).st_mode
        except OSError:
            continue
        if stat.S_ISLNK(mode):
            if not sandbox.permits(start / rel) or irregular(start / rel):
                continue
        elif not stat.S_ISREG(mode):
            continue
        yield rel


def _git_governs(start: Path) -> bool:
    """Whether `start` is inside a git work tree and not itself ignored there
    (an ignored directory, e.g. a scratch checkout under an ignored state/, has
    nothing in git's listing: it is walked instead)."""
    top = _git(start, ["rev-parse", "--show-toplevel"])
    if top is None or not top.strip():
        return False
    toplevel = Path(os.path.realpath(top.strip().splitlines()[-1]))
    if toplevel == start:
        return True
    if not start.is_relative_to(toplevel):
        return False
    rel = start.relative_to(toplevel).as_posix()
    # check-ignore takes paths and refuses pathspec magic (--literal-pathspecs).
    ignored = run(
        ["git", "--no-pager", *HARDENING_ARGS, "check-ignore", "-q", "--", rel],
        cwd=toplevel,
        timeout=GIT_LIST_TIMEOUT_S,
        extra_env=_GIT_ENV,
    )
    return ignored.returncode == 1  # 0: ignored; 128: an error


def _git(cwd: Path, args: list[str]) -> str | None:
    result = run(
        [*_GIT, *args],
        cwd=cwd,
        timeout=GIT_LIST_TIMEOUT_S,
        output_limit=_GIT_LIST_OUTPUT,
        extra_env=_GIT_ENV,
    )
    return result.output if result.ok else None


def walk(sandbox: Sandbox, start: Path) -> Iterator[Path]:
    """Files under `start`, in a stable order, skipping denied and noise directories.
    Symlinked directories are not followed; symlinked files are kept only when
    they resolve to somewhere the sandbox permits."""
    for dirpath, dirnames, filenames in os.walk(start):
        here = Path(dirpath)
        dirnames[:] = sorted(
            d for d in dirnames if not sandbox.is_denied_dir(here / d) and d not in NOISE_DIRS
        )
        for name in sorted(filenames):
            file = here / name
            if name.casefold() in sandbox.deny:
                continue  # `.git` is a file in a worktree
            if file.is_symlink() and not sandbox.permits(file):
                continue
            if irregular(file):
                continue  # a FIFO, socket or device: never listed, never opened
            yield file


def irregular(path: Path) -> bool:
    """Whether `path` exists and is not a regular file (following a final symlink,
    which the sandbox has vetted). A dangling link is not irregular: opening it
    fails like any unreadable file."""
    try:
        return not stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False
