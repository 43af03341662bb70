"""A small pool of worktrees that move by incremental checkouts.

On a large repository full checkouts dominate an iteration, so soda keeps its
worktrees under `state/worktrees/` and moves them instead of re-creating them:

- `view`: a detached, clean checkout of one commit. ORIENT reads the milestone
  tip there, the baseline runs there, and the gate tests the very merge commit
  it is about to land there; once landed that commit *is* the next tip, so the
  next iteration's ORIENT and baseline find the view already in place.
- `work-0`, `work-1`, ...: the executors' worktrees, one per task running at
  the same time, each on its task's branch; reused across iterations (a task
  takes the first free one, `release` gives it back, `keep` holds one for a
  task waiting for a person's answer).

Moving is `git reset --hard` / `checkout -B` (cost proportional to the
difference) and `git clean -ffdx`: nothing untracked or ignored survives a move,
so every test run sees exactly the committed tree. The pool remembers which
checkout is clean at which commit, with nothing run in it since: the view ORIENT
read is moved to the candidate by `reset --hard` alone (nothing untracked can be
there), and a view already in place costs nothing. A checkout lent out for
running code (`view(..., run=True)`, the work tree) is cleaned on its next move,
unless nothing could have stayed behind: the gate's test run sealed in the jail
(its writes go to a throw-away overlay, so the gate asks for the view with
`run=False`), or a work tree its task vouches for on `release` (nothing ran
there and everything written was committed: soda.loop.act.pristine).
Test results are cached by tree id (`tested`), so an unchanged tip is never
tested twice. The pool lives as long as a run; `remove_all` clears it when the
run ends, recovery after a crash.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
from pathlib import Path

import git
from git import Repo

from soda.errors import GitError
from soda.repo.workspace import Workspace, _git, branch_head, is_sha

VIEW = "view"
WORK = "work"
"""Work trees are `work-0`, `work-1`, ...: one per task running at the same time."""


class Checkouts:
    """The pool for one repository; one instance per process (see Session).
    Thread-safe: ACT's tasks take work trees from it at the same time."""

    def __init__(self, repo: Repo, root: Path) -> None:
        self.repo = repo
        self.root = root
        self._clean: dict[str, str] = {}
        """Checkout name -> the commit it is a clean checkout of, nothing run in it
        since. Absent: unknown (it must be cleaned before use)."""
        self._busy: dict[str, str] = {}
        """Work tree name -> the branch checked out there while a task uses it."""
        self._kept: set[str] = set()
        """Work trees kept for a task waiting for a person's answer (`keep`)."""
        self._lock = threading.Lock()

    def view(self, commit: str, run: bool = False) -> Path:
        """A clean, detached checkout of `commit`. `run`: the caller will run code
        there (tests), so the pool stops vouching for it until it is cleaned again.
        One caller at a time (ACT gates its merges one after another)."""
        path = self._ensure(VIEW, commit)
        with self._lock:
            clean_at = self._clean.pop(VIEW, None)
        if clean_at is None or clean_at != commit or not is_sha(commit):
            self._in(path, "reset", "-q", "--hard", commit)
            if clean_at is None:  # something ran here: untracked or ignored files
                self._in(path, "clean", "-q", "-ffdx")
        if not run and is_sha(commit):
            with self._lock:
                self._clean[VIEW] = commit
        return path

    def work(self, milestone_branch: str, branch: str) -> Workspace:
        """A worktree of its own on a new `branch` from the milestone head: the
        first free one of `work-0`, `work-1`, ... (made when none is free)."""
        name = self._take(branch)
        try:
            fork_point = branch_head(self.repo, milestone_branch)
            path = self._ensure(name, fork_point)
            with self._lock:
                clean = self._clean.pop(name, None) is not None
            # A clean checkout of any commit is a clean checkout of the fork
            # point after a forced checkout: git rewrites every tracked file that
            # differs, removes those the fork point lacks, and nothing else is
            # there. Only a tree something ran in (or nobody vouches for) is cleaned.
            self._in(path, "checkout", "-q", "--force", "-B", branch, fork_point)
            if not clean:
                self._in(path, "clean", "-q", "-ffdx")
        except BaseException:
            with self._lock:
                self._busy.pop(name, None)
            raise
        return Workspace(
            self.repo, path, branch, milestone_branch, fork_point, known_head=fork_point
        )

    def release(self, ws: Workspace, clean: bool = False) -> None:
        """End a task's use of its work tree: detach it, delete its branch, and
        give the tree back to the pool. Never raises (it runs in a `finally`).
        `clean`: the caller vouches that the tree is a clean checkout of its head
        (nothing ran there, everything written is committed), so the next `work`
        needs no `git clean`.

        Detaching only rewrites HEAD: the files stay as they are, the next `work`
        checks out over them (and cleans, unless vouched for)."""
        head: str | None = None
        try:
            head = ws.head()
            if not _detach(ws.path, head):
                self._in(ws.path, "update-ref", "--no-deref", "HEAD", head)
        except (GitError, OSError):
            head = None
            with contextlib.suppress(GitError, OSError):
                self._in(ws.path, "checkout", "-q", "--force", "--detach")
        if not ws.branch_deleted:
            with contextlib.suppress(GitError):
                # Not `branch -D`, which also rewrites .git/config: the branch has none.
                _git(self.repo, "update-ref", "-d", f"refs/heads/{ws.branch}")
        with self._lock:
            self._busy.pop(ws.path.name, None)
            self._kept.discard(ws.path.name)
            self._clean.pop(ws.path.name, None)
            if clean and head is not None:
                self._clean[ws.path.name] = head

    def keep(self, ws: Workspace) -> None:
        """Keep `ws` (its tree and branch) for a task that waits for a person's
        answer: no other task gets it, `remove_all` leaves it, until `release`."""
        with self._lock:
            self._kept.add(ws.path.name)

    def kept(self) -> dict[str, Path]:
        """Branch -> work tree of every kept workspace (see `keep`)."""
        with self._lock:
            return {self._busy[name]: self.root / name for name in sorted(self._kept)}

    def remove_all(self) -> None:
        """Remove the pool's worktrees but kept ones (at the end of a run); never
        raises."""
        with self._lock:
            self._clean.clear()
            kept = set(self._kept)
            self._busy = {name: b for name, b in self._busy.items() if name in kept}
        stale = False
        names = [VIEW, *self._work_names()]
        for name in names:
            path = self.root / name
            if name in kept or not path.exists():
                continue
            try:
                self.repo.git.worktree("remove", "--force", str(path))
            except git.GitCommandError:
                shutil.rmtree(path, ignore_errors=True)
                stale = True
        if stale:  # a registration may be left for a directory that is gone
            with contextlib.suppress(git.GitCommandError):
                self.repo.git.worktree("prune")

    def _work_names(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.name.startswith(f"{WORK}-"))

    def _take(self, branch: str) -> str:
        """Reserve the first free work tree name for `branch`."""
        with self._lock:
            index = 0
            while f"{WORK}-{index}" in self._busy:
                index += 1
            name = f"{WORK}-{index}"
            self._busy[name] = branch
            return name

    def _ensure(self, name: str, commit: str) -> Path:
        path = self.root / name
        if (path / ".git").is_file():
            return path
        with self._lock:
            self._clean.pop(name, None)
        if path.exists():  # a directory that is not (or no longer) a worktree
            shutil.rmtree(path, ignore_errors=True)
        self.root.mkdir(parents=True, exist_ok=True)
        # --force: take the path over even if a removed worktree is still
        # registered there (no `worktree prune` needed first); --detach, so no
        # branch is checked out twice. One `worktree add` at a time: each writes
        # the repository's worktree registry.
        with _ADDING:
            _git(self.repo, "worktree", "add", "-q", "--force", "--detach", str(path), commit)
        if is_sha(commit):
            with self._lock:
                self._clean[name] = commit  # a fresh checkout: nothing else there
        return path

    def _in(self, path: Path, *args: str) -> str:
        return _git(self.repo, "-C", str(path), *args)


_ADDING = threading.Lock()


def _detach(path: Path, commit: str) -> bool:
    """Point the worktree's HEAD at `commit` (detached) by writing its HEAD file
    the way git does (a `HEAD.lock` renamed over it), without a git process.
    False when the worktree's files are not the plain layout this expects."""
    try:
        pointer = (path / ".git").read_text(encoding="utf-8")
        if not pointer.startswith("gitdir: ") or not is_sha(commit):
            return False
        head = path / pointer[8:].strip() / "HEAD"
        if not head.is_file():
            return False
        lock = head.with_name("HEAD.lock")
        with lock.open("x", encoding="ascii") as fh:  # git's own lock: exclusive create
            fh.write(commit + "\n")
        lock.replace(head)
    except OSError:
        return False
    return True
