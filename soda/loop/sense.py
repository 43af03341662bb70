"""SENSE: the four claim groups (code, work, project, human), gathered by bounded,
deterministic queries. No LLM. Every list is capped so that what SENSE returns,
and how long it takes, does not grow with the repository's age."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from git import Repo
from sqlite_utils import Database

from soda.config import Config
from soda.contracts import (
    BudgetStatus,
    Claims,
    CodeClaims,
    CommentBrief,
    Commit,
    HumanClaims,
    HumanItem,
    IterationBrief,
    ProjectClaims,
    TaskBrief,
    WorkClaims,
)
from soda.contracts.outcomes import TaskStatus
from soda.errors import GitError
from soda.gate.evidence import last_act, tip_tests
from soda.human import for_orient, paused
from soda.human.write import describe
from soda.loop.attempts import loop_status, recent_attempts
from soda.repo import digest
from soda.repo.refs import branch_head
from soda.store import agent_calls, learnings, runs
from soda.store.digests import DigestRows
from soda.trace import SqliteTracker, Task

# The caps are small on purpose: a young history fills most of them, so what
# ORIENT reads (and pays for, in every agent) stays the same size as the run ages
# (bench/orient_input.py). Agents look further with their tools (git_log,
# git_diff, the repository map).
MAX_COMMITS = 10
MAX_FILES = 10
"""Files in the diffstat since the base: the most changed ones."""
MAX_UNCOMMITTED = 10
MAX_TASKS_PER_GROUP = 10
"""Open tasks shown."""
MAX_OTHER_TASKS = 5
"""In progress, blocked and recently closed tasks shown, each."""
MAX_COMMENTS = 5
MAX_RECENT_ITERATIONS = 5
# Human inputs: soda.human.for_orient's cap (MAX_FOR_ORIENT), and only those the
# routing table sends to ORIENT (soda.human.routing.ORIENT_SEES).


@dataclass(frozen=True)
class SenseInput:
    repo_path: Path
    milestone_branch: str
    base_commit: str
    milestone: str
    run_id: int
    iteration: int
    iteration_in_run: int
    config: Config
    db: Database
    repo: Repo | None = None
    """The session's repository: its object reader stays open between iterations
    (soda.repo.objects). None: opened from `repo_path`."""


def sense(inp: SenseInput) -> Claims:
    repo = inp.repo or Repo(inp.repo_path, search_parent_directories=True)
    status = _Status(repo)  # git reads the checkout while SENSE reads the store
    try:
        work, project, human = work_claims(inp), project_claims(inp), human_claims(inp.db)
        code = _code_claims(inp, repo, status)
    finally:
        status.close()
    return Claims(code=code, work=work, project=project, human=human)


def code_claims(inp: SenseInput) -> CodeClaims:
    repo = inp.repo or Repo(inp.repo_path, search_parent_directories=True)
    status = _Status(repo)
    try:
        return _code_claims(inp, repo, status)
    finally:
        status.close()


def _code_claims(inp: SenseInput, repo: Repo, status: _Status) -> CodeClaims:
    # The head is read from the ref files (no git process), and everything below
    # names it rather than the branch: one consistent snapshot of the milestone.
    head = branch_head(repo, inp.milestone_branch)
    # The commits and the diffstat since the base come from the stored digest,
    # advanced by what changed since the last SENSE (soda.repo.digest): the cost
    # follows the change, not the milestone's age.
    store = DigestRows(inp.db, inp.milestone_branch, inp.base_commit)
    found = digest.refresh(repo, store, inp.base_commit, head, MAX_COMMITS)
    commits = [
        Commit(sha=c["sha"][:10], subject=c["subject"], author=c["author"], date=c["date"])
        for c in found.recent
    ]
    files, stat = digest.diffstat(found, store.top(MAX_FILES), MAX_FILES)
    tests = tip_tests(inp.db, repo, head)
    return CodeClaims(
        branch=inp.milestone_branch,
        head=head,
        base_commit=inp.base_commit,
        uncommitted=status.entries(),  # last: git had all of the above to finish
        commits=commits,
        commits_total=found.commits_total,
        files_changed=files,
        diffstat=stat,
        tests=tests,
    )


class _Status:
    """The first MAX_UNCOMMITTED entries of `git status` in the person's checkout,
    tracked and untracked: started at once, read when needed (git works while
    SENSE reads the digest). Without optional locks: otherwise status may write
    the refreshed index back, taking `index.lock` in a checkout soda must not
    touch (a git command of the person's own would fail on it meanwhile)."""

    def __init__(self, repo: Repo) -> None:
        self.proc = subprocess.Popen(
            ["git", "--no-optional-locks", "status", "--porcelain"],
            cwd=repo.working_tree_dir or repo.git_dir,
            env={**os.environ, "LC_ALL": "C", "LANGUAGE": "C"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def entries(self) -> list[str]:
        out, err = self.proc.communicate()
        if self.proc.returncode:
            message = err.decode(errors="replace").strip()
            raise GitError(f"git status failed: {message or self.proc.returncode}")
        lines = out.decode("utf-8", errors="replace").splitlines()
        return [line[3:] for line in lines[:MAX_UNCOMMITTED]]

    def close(self) -> None:
        """End and reap the process when its answer was not read (SENSE failed)."""
        if self.proc.returncode is None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.communicate()


def _brief(task: Task) -> TaskBrief:
    return TaskBrief(
        id=task.id,
        title=task.title,
        status=task.status,
        reason=task.status_reason,
        parent_id=task.parent_id,
    )


def work_claims(inp: SenseInput) -> WorkClaims:
    tracker = SqliteTracker(inp.db, inp.milestone)
    root = tracker.root()

    def group(status: TaskStatus, cap: int = MAX_OTHER_TASKS) -> list[TaskBrief]:
        # One bounded query per group; the root (the spec itself) is not work.
        chosen = tracker.list(status, limit=cap + 1)
        return [_brief(t) for t in chosen if root is None or t.id != root.id][:cap]

    return WorkClaims(
        root=_brief(root) if root else None,
        open=group(TaskStatus.OPEN, MAX_TASKS_PER_GROUP),
        in_progress=group(TaskStatus.IN_PROGRESS),
        blocked=group(TaskStatus.BLOCKED),
        recently_closed=[_brief(t) for t in tracker.recently_closed(MAX_OTHER_TASKS)],
        comments=[
            CommentBrief(task_id=c.task_id, author=c.author, body=c.body, created_at=c.created_at)
            for c in tracker.recent_comments(MAX_COMMENTS)
        ],
    )


def project_claims(inp: SenseInput) -> ProjectClaims:
    window = max(MAX_RECENT_ITERATIONS, inp.config.loop.loop_window)
    rows = runs.recent_iterations(inp.db, inp.run_id, inp.iteration, window)
    recent = [
        IterationBrief(number=n, intent=i, decision=d, outcome=o, summary=s)
        for n, i, d, o, s in rows
    ]
    cost = agent_calls.run_cost(inp.db, inp.run_id)
    budget = inp.config.budget
    return ProjectClaims(
        iteration=inp.iteration,
        max_iterations=inp.config.loop.max_iterations,
        recent=recent,
        loop=loop_status(
            recent_attempts(inp.db, inp.run_id, inp.iteration, inp.config.loop.loop_window),
            inp.config.loop,
        ),
        budget=BudgetStatus(
            cost_usd=float(cost),
            max_cost_usd=budget.max_cost_usd,
            tokens_this_iteration=0,
            max_tokens_per_iteration=budget.max_tokens_per_iteration,
        ),
        last_act=last_act(inp.db, inp.repo_path, inp.iteration),
        learnings=learnings.active(inp.db, inp.config.context.max_learnings),
    )


def human_claims(db: Database) -> HumanClaims:
    """The pending inputs the routing table sends to ORIENT (a control, a verdict
    or a plan edit is for the daemon, ACT or the approval gate, never ORIENT's to
    read and mark applied), and whether a person paused soda."""
    pending = [
        HumanItem(
            id=item.id, kind=item.kind, text=describe(item.payload), received_at=item.received_at
        )
        for item in for_orient(db)
    ]
    return HumanClaims(pending=pending, paused=paused(db))
