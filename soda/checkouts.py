"""A small pool of worktrees that move by incremental checkouts.

On a large repository full checkouts dominate an iteration, so soda keeps two
worktrees under `state/worktrees/` and moves them instead of re-creating them:

- `view`: a detached, clean checkout of one commit. ORIENT reads the milestone
  tip there, the baseline runs there, and the gate tests the very merge commit
  it is about to land there; once landed that commit *is* the next tip, so the
  next iteration's ORIENT and baseline find the view already in place.
- `work`: the executor's worktree, on the iteration's branch.

Moving is `git reset --hard` / `checkout -B` (cost proportional to the
difference) and `git clean -ffdx`: nothing untracked or ignored survives a move,
so every test run sees exactly the committed tree. The pool remembers which
checkout is clean at which commit, with nothing run in it since: the view ORIENT
read is moved to the candidate by `reset --hard` alone (nothing untracked can be
there), and a view already in place costs nothing. A checkout lent out for
running code (`view(..., run=True)`, the work tree) is cleaned on its next move.
Test results are cached by tree id (`tested`), so an unchanged tip is never
tested twice. The pool lives as long as a run; `remove_all` clears it when the
run ends, recovery after a crash.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import git
from git import Repo

from soda.errors import GitError
from soda.workspace import Workspace, _git, branch_head, is_sha

VIEW = "view"
WORK = "work"


class Checkouts:
    """The pool for one repository; one instance per process (see Session)."""

    def __init__(self, repo: Repo, root: Path) -> None:
        self.repo = repo
        self.root = root
        self._clean: dict[str, str] = {}
        """Checkout name -> the commit it is a clean checkout of, nothing run in it
        since. Absent: unknown (it must be cleaned before use)."""

    def view(self, commit: str, run: bool = False) -> Path:
        """A clean, detached checkout of `commit`. `run`: the caller will run code
        there (tests), so the pool stops vouching for it until it is cleaned again."""
        path = self._ensure(VIEW, commit)
        clean_at = self._clean.pop(VIEW, None)
        if clean_at is None or clean_at != commit or not is_sha(commit):
            self._in(path, "reset", "-q", "--hard", commit)
            if clean_at is None:  # something ran here: untracked or ignored files
                self._in(path, "clean", "-q", "-ffdx")
        if not run and is_sha(commit):
            self._clean[VIEW] = commit
        return path

    def work(self, milestone_branch: str, branch: str) -> Workspace:
        """The executor's worktree on a new `branch` from the milestone head."""
        fork_point = branch_head(self.repo, milestone_branch)
        path = self._ensure(WORK, fork_point)
        fresh = self._clean.pop(WORK, None) == fork_point
        self._in(path, "checkout", "-q", "--force", "-B", branch, fork_point)
        if not fresh:
            self._in(path, "clean", "-q", "-ffdx")
        return Workspace(
            self.repo, path, branch, milestone_branch, fork_point, known_head=fork_point
        )

    def release(self, ws: Workspace) -> None:
        """End an iteration's use of the work tree: detach it and delete its branch.
        Never raises (it runs in a `finally`).

        Detaching only rewrites HEAD: the files stay as they are, the next `work`
        checks out over them and cleans."""
        try:
            self._in(ws.path, "update-ref", "--no-deref", "HEAD", ws.head())
        except (GitError, OSError):
            with contextlib.suppress(GitError, OSError):
                self._in(ws.path, "checkout", "-q", "--force", "--detach")
        with contextlib.suppress(GitError):
            _git(self.repo, "branch", "-D", ws.branch)

    def remove_all(self) -> None:
        """Remove the pool's worktrees (at the end of a run); never raises."""
        self._clean.clear()
        stale = False
        for name in (VIEW, WORK):
            path = self.root / name
            if not path.exists():
                continue
            try:
                self.repo.git.worktree("remove", "--force", str(path))
            except git.GitCommandError:
                shutil.rmtree(path, ignore_errors=True)
                stale = True
        if stale:  # a registration may be left for a directory that is gone
            with contextlib.suppress(git.GitCommandError):
                self.repo.git.worktree("prune")

    def _ensure(self, name: str, commit: str) -> Path:
        path = self.root / name
        if (path / ".git").is_file():
            return path
        self._clean.pop(name, None)
        if path.exists():  # a directory that is not (or no longer) a worktree
            shutil.rmtree(path, ignore_errors=True)
        self.root.mkdir(parents=True, exist_ok=True)
        # --force: take the path over even if a removed worktree is still
        # registered there (no `worktree prune` needed first); --detach, so no
        # branch is checked out twice.
        _git(self.repo, "worktree", "add", "-q", "--force", "--detach", str(path), commit)
        if is_sha(commit):
            self._clean[name] = commit  # a fresh checkout: nothing else there
        return path

    def _in(self, path: Path, *args: str) -> str:
        return _git(self.repo, "-C", str(path), *args)
