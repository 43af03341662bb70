"""A small pool of worktrees that move by incremental checkouts.

On a large repository full checkouts dominate an iteration, so soda keeps its
worktrees under `state/worktrees/` and moves them instead of re-creating them.
A checkout serves in one of two ways at a time:

- **a view** (`viewing`, `view`): a detached, clean checkout of one commit,
  held for as long as its user reads or tests it. ORIENT reads the milestone
  tip in one, the baseline runs in one, and the gate tests there the very merge
  commit it is about to land.
- **a work tree** (`work`): a task's checkout on its own branch, forked from
  the milestone tip; `release` gives it back, `keep` holds it for a task
  waiting for a person's answer.

A checkout is not bound to one of the two: the pool remembers which checkout is
a clean checkout of which commit, with nothing run in it since (`_clean`), and
hands out whichever needs the least work. Moving is `git reset --hard` /
`checkout -B` (cost proportional to the difference) and `git clean -ffdx`:
nothing untracked or ignored survives a move, so every test run sees exactly
the committed tree. What needs no git process at all:

- a view of a commit whose tree a free clean checkout already holds: its HEAD
  is pointed at the commit (`_point_head`, a file written as git writes it);
- a work tree forked from a commit whose tree a free clean checkout holds: the
  branch is made in one ref transaction (soda.repo.helpers) and HEAD pointed
  at it;
- the gate's checkout of a merge commit, when the task's own work tree holds
  its tree and the task vouches that the tree is clean (`vouch`: nothing ran
  there and everything written was committed, soda.loop.act.pristine): the
  work tree is lent as the view of its own merge (a commit with the task's
  head as a parent), HEAD pointed at the merge commit. Once landed,
  that commit is the next tip, so the next ORIENT finds its view in place and
  the next task its work tree: in an iteration with one task no checkout,
  reset or clean moves a file; only the task writes.

A checkout lent out for running code (`run=True`, a work tree) is cleaned on
its next move unless nothing could have stayed behind: the gate's test run
sealed in the jail (its writes go to a throw-away overlay, so the gate asks for
its view with `run=False`), or a work tree its task vouches for on `release`.
A checkout in use (a view held, a task's work tree) is never handed to anyone
else. Test results are cached by tree id (`tested`), so an unchanged tip is
never tested twice. The pool lives as long as a run; `remove_all` clears it
when the run ends, recovery after a crash.

Names: the first view made is `view`, the first work tree `work-0`, the others
`work-1`, ...; which serves as what changes from iteration to iteration.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import git
from git import Repo

from soda.errors import GitError
from soda.repo import helpers
from soda.repo.refs import _git, branch_head, is_sha, parents_of, point_head, tree_or_none
from soda.repo.workspace import Workspace

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
        """Checkout name -> the commit it is a clean checkout of (HEAD there),
        nothing run in it since. Absent: unknown (it must be cleaned before use)."""
        self._busy: dict[str, str] = {}
        """Work tree name -> the branch checked out there while a task uses it."""
        self._kept: set[str] = set()
        """Work trees kept for a task waiting for a person's answer (`keep`)."""
        self._held: dict[str, int] = {}
        """Checkout name -> how many views of it are held now."""
        self._standing: str | None = None
        """The checkout the last plain `view` handed out (held until the next one)."""
        self._vouched: dict[str, Workspace] = {}
        """Busy work trees whose tasks vouch they are clean checkouts of their heads."""
        self._lent: set[str] = set()
        """Busy work trees lent as a view: their HEAD is the pool's now."""
        self._lock = threading.Lock()

    # --- views ------------------------------------------------------------------

    @contextlib.contextmanager
    def viewing(self, commit: str, run: bool = False) -> Iterator[Path]:
        """A clean, detached checkout of `commit`, held until the block ends: no
        task gets it meanwhile. `run`: the caller will run code there (tests), so
        the pool stops vouching for it until it is cleaned again."""
        path = self._hold(commit, run)
        try:
            yield path
        finally:
            self._let_go(path.name)

    def view(self, commit: str, run: bool = False) -> Path:
        """A clean, detached checkout of `commit`, held until the next `view`
        (for a caller with no block to hold it in)."""
        self.let_go_view()
        path = self._hold(commit, run)
        with self._lock:
            self._standing = path.name
        return path

    def let_go_view(self) -> None:
        """Stop holding what the last plain `view` handed out (it stays clean
        where it is, for the next view or work tree that wants it)."""
        with self._lock:
            standing, self._standing = self._standing, None
        if standing is not None:
            self._let_go(standing)

    def vouch(self, ws: Workspace) -> None:
        """`ws`'s task has finished writing and vouches that its tree is a clean
        checkout of its head (soda.loop.act.pristine): until `release`, a view of
        a commit with the same tree (its merge) may be that very tree."""
        with self._lock:
            if self._busy.get(ws.path.name) == ws.branch:
                self._vouched[ws.path.name] = ws

    def _hold(self, commit: str, run: bool) -> Path:
        tree = tree_or_none(self.repo, commit) if is_sha(commit) else None
        with self._lock:
            name, how = self._choose_view(commit, tree)
            self._held[name] = self._held.get(name, 0) + 1
            clean_at = self._clean.pop(name, None)
        try:
            path = self._ensure(name, commit)
            with self._lock:
                if self._clean.pop(name, None) == commit:  # just made there
                    how = ""
            if how == "reset":
                self._in(path, "reset", "-q", "--hard", commit)
                if clean_at is None:  # something ran here: untracked or ignored files
                    self._in(path, "clean", "-q", "-ffdx")
        except BaseException:
            self._let_go(name)
            raise
        with self._lock:
            if run or not is_sha(commit):
                self._clean.pop(name, None)
            else:
                self._clean[name] = commit
        return path

    def _choose_view(self, commit: str, tree: str | None) -> tuple[str, str]:
        """Which checkout serves as the view of `commit` (lock held), and whether
        it must be `reset` there ("" when it is there already). A checkout that
        holds the same tree has its HEAD pointed at `commit` here (a file
        written): a free clean one, or a vouched work tree, lent."""
        free = self._free_names()
        if is_sha(commit):
            for name in [*self._held, *free]:  # already there: shared with its holder
                if self._clean.get(name) == commit:
                    return name, ""
        if tree is not None:
            for name in free:
                at = self._clean.get(name)
                same = at is not None and tree_or_none(self.repo, at) == tree
                if same and point_head(self.root / name, commit):
                    return name, ""
            parents = parents_of(self.repo, commit)
            for name, ws in self._vouched.items():
                # Only to the gate of the tree's own merge (the task's head is a
                # parent of the commit), and only with the very same tree.
                head = ws.head()
                if (
                    name in self._held
                    or head not in parents
                    or tree_or_none(self.repo, head) != tree
                ):
                    continue
                if point_head(ws.path, commit):
                    self._lent.add(name)
                    del self._vouched[name]
                    return name, ""
        clean = [name for name in free if name in self._clean]
        if clean or free:
            return (clean or free)[0], "reset"
        return self._new_name(VIEW), "reset"

    def _let_go(self, name: str) -> None:
        with self._lock:
            count = self._held.get(name, 0) - 1
            if count > 0:
                self._held[name] = count
            else:
                self._held.pop(name, None)

    # --- work trees -------------------------------------------------------------

    def work(self, milestone_branch: str, branch: str) -> Workspace:
        """A worktree of its own on a new `branch` from the milestone head: a free
        checkout (made when none is free), the one needing the least work."""
        fork_point = branch_head(self.repo, milestone_branch)
        tree = tree_or_none(self.repo, fork_point)
        with self._lock:
            name = self._choose_work(tree)
            self._busy[name] = branch
            clean_at = self._clean.pop(name, None)
        try:
            path = self._ensure(name, fork_point)
            with self._lock:
                if self._clean.pop(name, None) == fork_point:  # just made there
                    clean_at = fork_point
            same = (
                clean_at is not None
                and tree is not None
                and tree_or_none(self.repo, clean_at) == tree
            )
            if not (same and self._branch_here(path, branch, fork_point)):
                # A clean checkout of any commit is a clean checkout of the fork
                # point after a forced checkout: git rewrites every tracked file
                # that differs, removes those the fork point lacks, and nothing
                # else is there. Only a tree something ran in (or nobody vouches
                # for) is cleaned.
                self._in(path, "checkout", "-q", "--force", "-B", branch, fork_point)
                if clean_at is None:
                    self._in(path, "clean", "-q", "-ffdx")
        except BaseException:
            with self._lock:
                self._busy.pop(name, None)
            raise
        return Workspace(
            self.repo, path, branch, milestone_branch, fork_point, known_head=fork_point
        )

    def _choose_work(self, tree: str | None) -> str:
        """A free checkout for a new work tree (lock held): one whose tree is the
        fork point's, else a clean one, else any, else a new one."""
        free = self._free_names()
        clean = [name for name in free if name in self._clean]
        if tree is not None:
            for name in clean:
                if tree_or_none(self.repo, self._clean[name]) == tree:
                    return name
        if clean or free:
            return (clean or free)[0]
        return self._new_name(WORK)

    def _branch_here(self, path: Path, branch: str, commit: str) -> bool:
        """`checkout -B branch commit` in a checkout that already holds `commit`'s
        tree: the branch made (or moved) in one ref transaction, HEAD pointed at
        it. False when that could not be done (then git checks out)."""
        try:
            helpers.transaction(self.repo, [f"update refs/heads/{branch} {commit}"])
        except GitError:
            return False
        return point_head(path, f"ref: refs/heads/{branch}")

    def release(self, ws: Workspace, clean: bool = False) -> None:
        """End a task's use of its work tree: detach it, delete its branch, and
        give the tree back to the pool. Never raises (it runs in a `finally`).
        `clean`: the caller vouches that the tree is a clean checkout of its head
        (nothing ran there, everything written is committed), so the next `work`
        needs no `git clean`.

        Detaching only rewrites HEAD: the files stay as they are, the next `work`
        checks out over them (and cleans, unless vouched for). A tree lent as a
        view is the pool's already: its HEAD stays where the view put it."""
        name = ws.path.name
        with self._lock:
            lent = name in self._lent
        head: str | None = None
        if not lent:
            try:
                head = ws.head()
                if not point_head(ws.path, head):
                    self._in(ws.path, "update-ref", "--no-deref", "HEAD", head)
            except (GitError, OSError):
                head = None
                with contextlib.suppress(GitError, OSError):
                    self._in(ws.path, "checkout", "-q", "--force", "--detach")
        if not ws.branch_deleted:
            try:
                helpers.transaction(self.repo, [f"delete refs/heads/{ws.branch}"])
            except GitError:
                with contextlib.suppress(GitError):
                    # Not `branch -D`, which also rewrites .git/config: the branch has none.
                    _git(self.repo, "update-ref", "-d", f"refs/heads/{ws.branch}")
        with self._lock:
            self._busy.pop(name, None)
            self._kept.discard(name)
            self._vouched.pop(name, None)
            if lent:
                self._lent.discard(name)  # clean where the view left it, or unknown
            else:
                self._clean.pop(name, None)
                if clean and head is not None:
                    self._clean[name] = head

    def keep(self, ws: Workspace) -> None:
        """Keep `ws` (its tree and branch) for a task that waits for a person's
        answer: no other task gets it, `remove_all` leaves it, until `release`."""
        with self._lock:
            self._kept.add(ws.path.name)
            self._vouched.pop(ws.path.name, None)

    def kept(self) -> dict[str, Path]:
        """Branch -> work tree of every kept workspace (see `keep`)."""
        with self._lock:
            return {self._busy[name]: self.root / name for name in sorted(self._kept)}

    def remove_all(self) -> None:
        """Remove the pool's worktrees but kept ones (at the end of a run); never
        raises."""
        with self._lock:
            self._clean.clear()
            self._held.clear()
            self._standing = None
            self._vouched.clear()
            self._lent.clear()
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

    # --- the pool's checkouts -----------------------------------------------------

    def _work_names(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.name.startswith(f"{WORK}-"))

    def _free_names(self) -> list[str]:
        """Checkouts nobody uses (lock held): on disk or remembered clean, neither a
        task's nor a held view's nor kept. The pool's own order: `view` first,
        then `work-0`, `work-1`, ..."""
        names = dict.fromkeys([VIEW, *self._work_names(), *sorted(self._clean)])
        return [
            name
            for name in names
            if name not in self._busy
            and name not in self._held
            and name not in self._kept
            and (name in self._clean or (self.root / name).exists())
        ]

    def _new_name(self, prefix: str) -> str:
        """A name for a new checkout (lock held): `view` for the first view, else
        the first `work-N` nobody has."""
        taken = {*self._busy, *self._held, *self._kept, *self._clean}
        if prefix == VIEW and VIEW not in taken and not (self.root / VIEW).exists():
            return VIEW
        index = 0
        while f"{WORK}-{index}" in taken or (self.root / f"{WORK}-{index}").exists():
            index += 1
        return f"{WORK}-{index}"

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
