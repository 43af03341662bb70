"""Reading refs and trees with as few git processes as possible: a branch's head
from the ref files (`branch_head`), a commit's tree remembered once asked
(`tree_of`, shared by ACT's task threads behind a lock), a worktree's HEAD from
its file (`worktree_head`), and `_git`, the one way soda's repository code runs
git (soda's identity, no automatic gc)."""

from __future__ import annotations

import contextlib
import re
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path

import git
from git import Repo
from git.refs.symbolic import SymbolicReference

from soda.errors import GitError
from soda.repo import objects
from soda.repo.git import SODA_IDENTITY

_SHA = re.compile(r"[0-9a-f]{40}")
_TREES: OrderedDict[str, str] = OrderedDict()
_TREES_KEPT = 256
_TREES_LOCK = threading.Lock()
"""ACT's task threads share the tree cache."""


NO_AUTO_GC: tuple[str, ...] = ("-c", "gc.auto=0", "-c", "maintenance.auto=false")
"""ACT's tasks commit and merge in several worktrees at once: a `gc --auto` that
one of them started (it packs refs) could make another's ref update fail. The
person's own git commands still collect garbage as configured."""


def _git(repo: Repo, *args: str, stdin: str | None = None) -> str:
    command = ["git", *SODA_IDENTITY, *NO_AUTO_GC, *args]
    try:
        if stdin is None:
            return str(repo.git.execute(command))
        with tempfile.TemporaryFile() as feed:  # GitPython takes a file as stdin
            feed.write(stdin.encode())
            feed.seek(0)
            return repo.git.execute(command, istream=feed)
    except git.GitCommandError as exc:
        raise GitError(f"git {' '.join(args)} failed: {exc.stderr.strip() or exc}") from exc


def is_sha(name: str) -> bool:
    """A full (SHA-1) object id, not a ref name or an abbreviation."""
    return bool(_SHA.fullmatch(name))


def branch_head(repo: Repo, branch: str) -> str:
    """The commit `branch` points at. Read from the ref files (loose or packed)
    without a git process; `git rev-parse` when they do not say (another ref
    storage, a ref being rewritten): GitError if the branch does not exist."""
    ref = f"refs/heads/{branch}"
    with contextlib.suppress(Exception):  # any surprise: ask git instead
        sha = SymbolicReference.dereference_recursive(repo, ref)
        if is_sha(sha):
            return sha
    return _git(repo, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}")


def tree_of(repo: Repo, commit: str) -> str:
    """The tree id of `commit`. Remembered per commit id (a commit's tree never
    changes); read from the object database (soda.repo.objects), `git rev-parse`
    when that cannot say."""
    with _TREES_LOCK:
        tree = _TREES.get(commit)
    if tree is None:
        try:
            tree = objects.tree_of(repo, commit) if is_sha(commit) else ""
        except objects.Undecided:
            tree = ""
        tree = tree or _git(repo, "rev-parse", f"{commit}^{{tree}}")
        _remember_tree(commit, tree)
    return tree


def worktree_head(repo: Repo, path: Path) -> str | None:
    """The commit a worktree's HEAD names, read from its files (`.git` names the
    worktree's git directory, its HEAD a branch or a commit); None when they do
    not say plainly."""
    with contextlib.suppress(OSError, ValueError):
        pointer = (path / ".git").read_text(encoding="utf-8")
        if pointer.startswith("gitdir: "):
            head = (path / pointer[8:].strip() / "HEAD").read_text(encoding="utf-8").strip()
            if is_sha(head):
                return head
            if head.startswith("ref: refs/heads/"):
                return branch_head(repo, head.removeprefix("ref: refs/heads/"))
    return None


def _worktree_git_dir(path: Path) -> Path:
    """The git directory of the worktree at `path` (its `.git` file names it)."""
    pointer = (path / ".git").read_text(encoding="utf-8")
    if not pointer.startswith("gitdir: "):
        raise ValueError(f"{path}/.git does not name a git directory")
    return path / pointer[8:].strip()


def _head_file(path: Path) -> str | None:
    """What the worktree's HEAD file says (a commit id or `ref: ...`)."""
    try:
        return (_worktree_git_dir(path) / "HEAD").read_text(encoding="utf-8").strip()
    except (OSError, ValueError):
        return None


def _remember_tree(commit: str, tree: str) -> None:
    if not is_sha(commit):
        return
    with _TREES_LOCK:
        _TREES[commit] = tree
        _TREES.move_to_end(commit)
        while len(_TREES) > _TREES_KEPT:
            _TREES.popitem(last=False)


def tree_or_none(repo: Repo, commit: str) -> str | None:
    """`commit`'s tree, None when it cannot be read (e.g. collected)."""
    try:
        return tree_of(repo, commit)
    except GitError:
        return None


def parents_of(repo: Repo, commit: str) -> tuple[str, ...]:
    """`commit`'s parents from the object database, () when it cannot say."""
    try:
        return objects.commit_info(repo, commit).parents
    except objects.Undecided:
        return ()


def point_head(path: Path, target: str) -> bool:
    """Point the worktree's HEAD at `target` (a commit id: detached; or
    `ref: refs/heads/...`) by writing its HEAD file the way git does (a
    `HEAD.lock` renamed over it), without a git process. False when the
    worktree's files are not the plain layout this expects."""
    try:
        pointer = (path / ".git").read_text(encoding="utf-8")
        if not pointer.startswith("gitdir: "):
            return False
        if not (is_sha(target) or target.startswith("ref: refs/heads/")) or "\n" in target:
            return False
        head = path / pointer[8:].strip() / "HEAD"
        if not head.is_file():
            return False
        lock = head.with_name("HEAD.lock")
        with lock.open("x", encoding="ascii") as fh:  # git's own lock: exclusive create
            fh.write(target + "\n")
        lock.replace(head)
    except (OSError, UnicodeError):
        return False
    return True
