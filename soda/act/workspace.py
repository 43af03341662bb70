"""The iteration's workspace: a git worktree on a fresh branch from the milestone.

The user's checkout is never touched: soda works in `state/worktrees/iter-N` on
branch `soda-work/<milestone>/iter-N`, forked from the milestone branch, and
moves the milestone branch only by writing a merge commit object and
compare-and-swapping the ref (see `merge_into_milestone`). The worktree is
removed in every case by `Workspace.remove`, which the caller runs in a `finally`.
"""

from __future__ import annotations

import contextlib
import shutil
from dataclasses import dataclass
from pathlib import Path

import git
from git import Repo

from soda.errors import GitError
from soda.git import SODA_IDENTITY


def _git(repo: Repo, *args: str) -> str:
    try:
        return repo.git.execute(["git", *SODA_IDENTITY, *args])  # type: ignore[return-value]
    except git.GitCommandError as exc:
        raise GitError(f"git {' '.join(args)} failed: {exc.stderr.strip() or exc}") from exc


@dataclass
class Workspace:
    repo: Repo
    path: Path
    branch: str
    milestone_branch: str
    fork_point: str
    """Milestone head the branch was created from."""

    @property
    def worktree(self) -> Repo:
        return Repo(self.path)

    def head(self) -> str:
        return _git(self.worktree, "rev-parse", "HEAD")

    def commit_all(self, message: str) -> str | None:
        """Commit everything in the worktree; None when there was nothing to commit."""
        tree = self.worktree
        _git(tree, "add", "-A")
        if not _git(tree, "status", "--porcelain"):
            return None
        _git(tree, "commit", "-q", "--no-verify", "-m", message)
        return self.head()

    def reset_to(self, commit: str) -> None:
        """Throw away everything since `commit` (a task that gave up)."""
        tree = self.worktree
        _git(tree, "reset", "-q", "--hard", commit)
        _git(tree, "clean", "-q", "-fd")

    def catch_up(self) -> bool:
        """Merge milestone changes made since the fork into the work branch, so the
        final test run sees what will land. False on a conflict (merge aborted)."""
        current = _git(self.repo, "rev-parse", self.milestone_branch)
        if current == self.fork_point:
            return True
        try:
            self.worktree.git.execute(
                ["git", *SODA_IDENTITY, "merge", "--no-edit", "-q", self.milestone_branch]
            )
        except git.GitCommandError:
            _git(self.worktree, "merge", "--abort")
            return False
        return True

    def remove(self) -> None:
        """Remove the worktree directory and its registration; never raises."""
        try:
            self.repo.git.worktree("remove", "--force", str(self.path))
        except git.GitCommandError:
            shutil.rmtree(self.path, ignore_errors=True)
        with contextlib.suppress(git.GitCommandError):
            self.repo.git.worktree("prune")


def create_workspace(repo: Repo, worktrees: Path, milestone_branch: str, name: str) -> Workspace:
    """A fresh worktree at `worktrees/name` on a new branch from the milestone head.
    Leftovers of an earlier crashed attempt with the same name are cleared first."""
    milestone = milestone_branch.removeprefix("soda/")
    branch = f"soda-work/{milestone}/{name}"
    path = worktrees / name
    remove_stale(repo, path, branch)
    fork_point = _git(repo, "rev-parse", milestone_branch)
    worktrees.mkdir(parents=True, exist_ok=True)
    _git(repo, "worktree", "add", "-q", "-b", branch, str(path), fork_point)
    return Workspace(repo, path, branch, milestone_branch, fork_point)


def remove_stale(repo: Repo, path: Path, branch: str | None = None) -> None:
    if path.exists():
        Workspace(repo, path, branch or "", "", "").remove()
    repo.git.worktree("prune")
    if branch and branch in [head.name for head in repo.heads]:
        _git(repo, "branch", "-D", branch)


def merge_into_milestone(ws: Workspace, message: str) -> str:
    """Write a --no-ff merge of the work branch into the milestone branch and move
    the branch to it (compare-and-swap): `prepare_merge` then `land`."""
    commit, milestone_head = prepare_merge(ws, message)
    land(ws.repo, ws.milestone_branch, commit, milestone_head)
    return commit


def prepare_merge(ws: Workspace, message: str) -> tuple[str, str]:
    """The merge commit object, without a checkout or a ref move: the work tree
    (which already contains the milestone head, see catch_up) with both heads as
    parents. Returns (merge commit, milestone head it was made against); the gate
    tests exactly this commit before `land` moves the branch to it."""
    repo = ws.repo
    milestone_head = _git(repo, "rev-parse", ws.milestone_branch)
    work_head = ws.head()
    if _git(repo, "merge-base", milestone_head, work_head) != milestone_head:
        raise GitError(f"{ws.branch} does not contain {ws.milestone_branch}; refusing to merge")
    tree = _git(repo, "rev-parse", f"{work_head}^{{tree}}")
    commit = _git(repo, "commit-tree", tree, "-p", milestone_head, "-p", work_head, "-m", message)
    return commit, milestone_head


def land(repo: Repo, branch: str, commit: str, expected: str) -> None:
    """Move `branch` to `commit` only if it still points at `expected`
    (compare-and-swap); GitError, nothing moved, if it does not."""
    current = _git(repo, "rev-parse", branch)
    if current != expected:
        raise GitError(
            f"{branch} moved from {expected[:10]} to {current[:10]} while the change was "
            "tested; not merged"
        )
    _git(repo, "update-ref", f"refs/heads/{branch}", commit, expected)


def delete_branch(repo: Repo, branch: str) -> None:
    with contextlib.suppress(git.GitCommandError):
        repo.git.branch("-D", branch)


def land_on_base(repo: Repo, milestone_branch: str, base_branch: str) -> str:
    """`[act] on_done = "merge"`: fast-forward the base branch to the milestone.

    Only a fast-forward, so nothing lands that the gate did not test; and the
    user's checkout moves only if it is on the base branch with no local changes.
    Returns what happened, for the run's final reason."""
    milestone = _git(repo, "rev-parse", milestone_branch)
    base = _git(repo, "rev-parse", base_branch)
    if base == milestone:
        return f"{base_branch} already at {milestone_branch}"
    if _git(repo, "merge-base", base, milestone) != base:
        return f"{base_branch} moved since the milestone began; merge {milestone_branch} yourself"
    if repo.head.is_detached or repo.active_branch.name != base_branch:
        _git(repo, "update-ref", f"refs/heads/{base_branch}", milestone, base)
    elif repo.is_dirty(untracked_files=False):
        return f"{base_branch} is checked out with local changes; merge {milestone_branch} yourself"
    else:
        _git(repo, "merge", "--ff-only", "-q", milestone_branch)
    return f"fast-forwarded {base_branch} to {milestone_branch} ({milestone[:10]})"
