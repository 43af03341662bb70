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
import hashlib
import shutil
from pathlib import Path

import git
from git import Repo
from sqlite_utils import Database

from soda.act.gate import own_modules
from soda.act.tests import TestReport, report_kind, run_tests
from soda.act.workspace import Workspace, _git, branch_head, is_sha, tree_of
from soda.config import Config
from soda.errors import GitError
from soda.jail import Jail
from soda.store import test_results

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


def setup_key(config: Config, jail: Jail) -> str:
    """Everything besides the tree that decides a test run's result: the command,
    the report, the jail, and the environment the tests import from (what is
    bound and exposed, and when those directories last changed: reinstalling the
    project there gives a new key)."""
    parts = [
        config.project.test_command,
        report_kind(config),
        config.gate.junit or "",
        jail.mode,
        str(jail.network),
        *map(str, jail.expose),
        *jail.bind_ignored,
        *_environment_stamps(jail),
    ]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _environment_stamps(jail: Jail) -> list[str]:
    dirs = [jail.repo_root / name for name in jail.bind_ignored] + list(jail.expose)
    stamps = []
    for directory in dirs:
        for path in (directory, *directory.glob("lib/python*/site-packages")):
            with contextlib.suppress(OSError):
                stamps.append(f"{path}:{path.stat().st_mtime_ns}")
    return stamps


def tested(
    config: Config, jail: Jail, db: Database, checkouts: Checkouts, commit: str
) -> tuple[TestReport, bool]:
    """The test results of `commit` on a clean checkout, from the cache when its
    tree was tested before; the flag says whether they were cached."""
    repo = checkouts.repo
    tree = tree_of(repo, commit)
    setup = setup_key(config, jail)
    hit = test_results.cached(db, tree, setup)
    if hit is not None:
        return TestReport.from_json(hit), True
    path = checkouts.view(commit, run=True)
    # Only pytest runs report which modules they imported (see soda.act.tests).
    own = own_modules(repo, commit) if report_kind(config) == "pytest" else frozenset()
    report = run_tests(config, jail, path, own)
    # A run that could not be judged is not remembered: its cause is usually the
    # environment, which the person fixes without changing the tree.
    if not (report.timed_out or report.problem or report.foreign_imports):
        test_results.store(db, tree, setup, commit, report.summary(), report.to_json())
    return report, False
