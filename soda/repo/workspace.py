"""A task's workspace: a git worktree on a fresh branch from the milestone.

The user's checkout is never touched: each task of a plan works in a worktree
under `state/worktrees/` (the pool's `work-0`, `work-1`, ..., see
`soda.repo.checkouts`) on branch `soda-work/<milestone>/iter-N-<task key>`, forked
from the milestone branch, and soda moves the milestone branch only by writing
a merge commit object and compare-and-swapping the ref (`prepare_merge`, then
`land`; `merge_into_milestone` does both).

Every git process costs a fork of a large Python process, and an iteration
asks the same questions several times, so the answers git has already given
are kept: a branch's head is read from the ref files (`branch_head`), a commit's
tree is remembered (`tree_of`, shared by ACT's task threads behind a lock), and
a workspace knows its own head while only soda moves it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from git import Repo

from soda.errors import GitError
from soda.repo import helpers, objects, writing
from soda.repo.refs import (
    _git,
    _head_file,
    _remember_tree,
    _worktree_git_dir,
    branch_head,
    is_sha,
    tree_of,
    worktree_head,
)


@dataclass(frozen=True)
class Changes:
    """Every file that changed in a work tree since its head, as its task knows
    it (paths relative to the tree)."""

    paths: list[str]


@dataclass
class Workspace:
    repo: Repo
    path: Path
    branch: str
    milestone_branch: str
    fork_point: str
    """Milestone head the branch was created from."""
    known_head: str | None = None
    """The branch's head when soda knows it (it made it); None: ask git."""
    milestone_head: str | None = field(default=None, init=False)
    """The milestone head `catch_up` last merged (what `prepare_merge` merges against)."""
    branch_deleted: bool = field(default=False, init=False)
    """`land` deleted the branch with the merge that took its work (one ref
    transaction); the pool then has nothing to delete."""

    def head(self) -> str:
        """The work branch's head: known without git while only soda moves it
        (creation, `commit_all`, `reset_to`), read from git otherwise."""
        if self.known_head is None:
            head = worktree_head(self.repo, self.path)
            if head is None:
                head, tree = self._in("rev-parse", "HEAD", "HEAD^{tree}").split()
                _remember_tree(head, tree)
            self.known_head = head
        return self.known_head

    def commit_all(self, message: str, changes: Changes | None = None) -> str | None:
        """Commit everything in the worktree; None when there was nothing to commit.
        `changes`: the caller knows every file that changed since the head (files
        written, nothing run: soda.loop.act.pristine). Then git need not look for
        changes in the whole tree (`git add -A` scans every directory, `git
        commit` refreshes every entry and rewrites the index's trees): nothing
        is committed when none changed, else `git add` stages just these files
        and the commit is written from the index's entries for them
        (`_commit_staged`)."""
        if changes is not None:
            if not changes.paths:
                return None
            try:
                feed = "".join(f":(literal){path}\0" for path in changes.paths)
                _git(
                    self.repo, "-C", str(self.path), "add",
                    "--pathspec-from-file=-", "--pathspec-file-nul", stdin=feed,
                )  # fmt: skip
            except GitError:
                pass  # e.g. an ignored file written: the full way below says what to do
            else:
                return self._commit_staged(message, changes.paths)
        self._in("add", "-A")
        return self._git_commit(message)

    def _git_commit(self, message: str) -> str | None:
        """`git commit` of what is staged; None when nothing is. `git commit`
        fails when nothing is staged: that is the only failure that means
        "nothing to commit". The head is read again afterwards: an agent working
        unconfined (sandbox.mode = "none") may have moved it."""
        self.known_head = None
        try:
            self._in("commit", "-q", "--no-verify", "-m", message)
        except GitError:
            if self._staged():
                raise
            return None
        return self.head()

    def _commit_staged(self, message: str, paths: list[str]) -> str | None:
        """Commit what `git add PATHS` staged: the head's tree with the index's
        entries for `paths` (soda.repo.objects.index_entries, soda.repo.writing:
        the tree and the commit `git commit -m` would write), the branch moved by
        compare-and-swap from the head. `git commit` when soda cannot be sure
        (the index or a tree it cannot read, the head not on the branch, a
        repository only git may write); None when nothing changed."""
        head = self.head()
        commit: str | None = None
        try:
            index = _worktree_git_dir(self.path) / "index"
            entries = objects.index_entries(index, paths)
            files = {path: (mode, sha) for path, (mode, sha) in entries.items()}
            tree = writing.tree_with(self.repo, tree_of(self.repo, head), files)
            on_branch = _head_file(self.path) == f"ref: refs/heads/{self.branch}"
            if tree is not None and on_branch:
                if tree == tree_of(self.repo, head):
                    return None  # the same content written again
                commit = writing.commit(self.repo, tree, [head], message)
                if commit is not None:
                    helpers.transaction(
                        self.repo, [f"update refs/heads/{self.branch} {commit} {head}"]
                    )
                    _remember_tree(commit, tree)
                    self.known_head = commit
                    return commit
        except (objects.Undecided, GitError, OSError, ValueError):
            pass
        return self._git_commit(message)

    def _staged(self) -> bool:
        try:
            self._in("diff", "--cached", "--quiet", "HEAD", "--")
        except GitError:
            return True
        return False

    def dirty(self) -> bool:
        """Whether the worktree holds changes not committed (untracked files too)."""
        return bool(self._in("status", "--porcelain", "--untracked-files=all").strip())

    def diff_stat(self) -> str:
        """What the branch changed since its fork point, as `git diff --stat` shows
        it: from the long-lived `git diff-tree` (soda.repo.helpers) with the
        options the porcelain takes from the config, `git diff` when that fails."""
        head = self.head()
        try:
            return helpers.tree_diff(
                self.repo,
                stat_options(self.repo),
                tree_of(self.repo, self.fork_point),
                tree_of(self.repo, head),
            ).rstrip("\n")
        except GitError:
            return self._in("diff", "--stat", self.fork_point, head, "--")

    def reset_to(self, commit: str) -> None:
        """Throw away everything since `commit` (a task that gave up)."""
        self._in("reset", "-q", "--hard", commit)
        self._in("clean", "-q", "-fd")
        self.known_head = commit if is_sha(commit) else None

    def catch_up(self) -> bool:
        """Merge milestone changes made since the fork into the work branch, so the
        final test run sees what will land. False on a conflict (merge aborted)."""
        current = branch_head(self.repo, self.milestone_branch)
        self.milestone_head = current
        if current == self.fork_point:
            return True
        self.known_head = None
        try:
            message = f"Merge {self.milestone_branch} ({current[:10]}) into {self.branch}"
            self._in("merge", "--no-edit", "-q", "-m", message, current)
        except GitError:
            self._in("merge", "--abort")
            return False
        return True

    def _in(self, *args: str) -> str:
        """git in the worktree (with soda's options)."""
        return _git(self.repo, "-C", str(self.path), *args)


_TRUE = ("true", "yes", "on", "1")


def stat_options(repo: Repo) -> tuple[str, ...]:
    """`git diff-tree` options for what `git diff --stat` shows under the
    repository's config: the porcelain detects renames unless `diff.renames`
    says otherwise, and takes `diff.algorithm` and `diff.statGraphWidth`."""
    try:
        found = helpers.settings(repo)
    except GitError:
        return ("--stat", "-M")
    options = ["--stat"]
    renames = (found.get("diff.renames") or "true").strip().lower()
    if renames.startswith("cop"):
        options.append("-C")
    elif renames in _TRUE:
        options.append("-M")
    algorithm = found.get("diff.algorithm")
    if algorithm:
        options.append(f"--diff-algorithm={algorithm}")
    width = found.get("diff.statgraphwidth")
    if width and width.strip().isdigit():
        options.append(f"--stat-graph-width={width.strip()}")
    return tuple(options)


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
    tests exactly this commit before `land` moves the branch to it.

    The milestone head is the one `catch_up` merged: should the branch have moved
    since, `land`'s compare-and-swap refuses the merge."""
    repo = ws.repo
    milestone_head = ws.milestone_head or branch_head(repo, ws.milestone_branch)
    work_head = ws.head()
    if not contains(repo, work_head, milestone_head):
        raise GitError(f"{ws.branch} does not contain {ws.milestone_branch}; refusing to merge")
    tree = tree_of(repo, work_head)
    # Written in Python (soda.repo.writing: the object `git commit-tree` writes),
    # by git itself when only git can be sure of the bytes.
    commit = writing.commit_tree(repo, tree, [milestone_head, work_head], message) or _git(
        repo, "commit-tree", tree, "-p", milestone_head, "-p", work_head, "-m", message
    )
    _remember_tree(commit, tree)
    return commit, milestone_head


def contains(repo: Repo, head: str, commit: str) -> bool:
    """Whether `commit` is `head` or one of its ancestors: a short walk of the
    object database (a work branch holds the milestone head a few commits down),
    `git merge-base --is-ancestor` when the walk cannot tell."""
    try:
        return objects.is_ancestor(repo, commit, head)
    except objects.Undecided:
        pass
    try:
        _git(repo, "merge-base", "--is-ancestor", commit, head)
    except GitError:
        return False
    return True


def land(
    repo: Repo, branch: str, commit: str, expected: str, delete: Workspace | None = None
) -> None:
    """Move `branch` to `commit` only if it still points at `expected`
    (compare-and-swap); GitError, nothing moved, if it does not. `delete`: the
    workspace whose work this merge lands; its branch is deleted in the same
    ref transaction (both happen or neither)."""
    lines = [f"update refs/heads/{branch} {commit} {expected}"]
    if delete is not None:
        lines.append(f"delete refs/heads/{delete.branch}")
    try:
        # One transaction of the long-lived `git update-ref --stdin` (git's own
        # lock files and packed-refs handling, soda.repo.helpers).
        helpers.transaction(repo, lines)
    except GitError:
        current = branch_head(repo, branch)
        if current == commit:  # it did land (git ended before it could say so)
            if delete is not None:
                delete.branch_deleted = not _ref_exists(repo, f"refs/heads/{delete.branch}")
            return
        if current == expected:
            raise  # refused for another reason: git's message says which
        raise GitError(
            f"{branch} moved from {expected[:10]} to {current[:10]} while the change was "
            "tested; not merged"
        ) from None
    if delete is not None:
        delete.branch_deleted = True


def _ref_exists(repo: Repo, ref: str) -> bool:
    try:
        _git(repo, "rev-parse", "--verify", "-q", ref)
    except GitError:
        return False
    return True


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
