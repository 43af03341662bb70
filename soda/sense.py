"""SENSE: the four claim groups (code, work, project, human), gathered by bounded,
deterministic queries. No LLM. Every list is capped so that what SENSE returns,
and how long it takes, does not grow with the repository's age."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from git import Git, Repo
from sqlite_utils import Database

from soda.config import Config
from soda.contracts import (
    BudgetStatus,
    Claims,
    CodeClaims,
    CommentBrief,
    Commit,
    HumanClaims,
    HumanInput,
    HumanItem,
    IterationBrief,
    LoopStatus,
    ProjectClaims,
    TaskBrief,
    WorkClaims,
)
from soda.store import agent_calls, human_inputs, learnings, runs
from soda.trace import SqliteTracker, Task
from soda.workspace import branch_head

MAX_COMMITS = 20
MAX_FILES = 100
MAX_DIFFSTAT_CHARS = 4000
MAX_UNCOMMITTED = 50
MAX_TASKS_PER_GROUP = 50
MAX_COMMENTS = 20
MAX_RECENT_ITERATIONS = 5
MAX_LEARNINGS = 20
MAX_HUMAN = 20
NOT_FOR_ORIENT = ("pause", "resume", "stop", "cancel", "approve", "reject")
"""Control and approval inputs: the daemon, the approval gate and ACT act on them."""


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


def sense(inp: SenseInput) -> Claims:
    return Claims(
        code=code_claims(inp),
        work=work_claims(inp),
        project=project_claims(inp),
        human=human_claims(inp.db),
    )


def code_claims(inp: SenseInput) -> CodeClaims:
    repo = Repo(inp.repo_path, search_parent_directories=True)
    git = repo.git
    # The head is read from the ref files (no git process), and every query below
    # names it rather than the branch: one consistent snapshot of the milestone.
    head = branch_head(repo, inp.milestone_branch)
    span = f"{inp.base_commit}..{head}"
    log = git.log(span, f"-{MAX_COMMITS}", "--format=%H%x1f%s%x1f%an%x1f%aI")
    commits = [
        Commit(sha=sha[:10], subject=s, author=a, date=d)
        for sha, s, a, d in (line.split("\x1f") for line in log.splitlines() if line)
    ]
    # Fewer than the cap: the log listed them all, no count needed.
    total = len(commits) if len(commits) < MAX_COMMITS else int(git.rev_list("--count", span))
    files, diffstat = _diffstat(git.diff("--numstat", span))
    return CodeClaims(
        branch=inp.milestone_branch,
        head=head,
        base_commit=inp.base_commit,
        uncommitted=_uncommitted(git),
        commits=commits,
        commits_total=total,
        files_changed=files[:MAX_FILES],
        diffstat=diffstat,
    )


def _uncommitted(git: Git) -> list[str]:
    """The first MAX_UNCOMMITTED entries of `git status` in the person's checkout,
    tracked and untracked. Without optional locks: otherwise status may write the
    refreshed index back, taking `index.lock` in a checkout soda must not touch
    (a git command of the person's own would fail on it meanwhile)."""
    status = git.execute(["git", "--no-optional-locks", "status", "--porcelain"])
    return [line[3:] for line in str(status).splitlines()[:MAX_UNCOMMITTED]]


def _diffstat(numstat: str) -> tuple[list[str], str]:
    """Changed files and a `--stat`-like summary from one `git diff --numstat`
    (one git call instead of two: SENSE runs every iteration)."""
    files, lines, added, removed = [], [], 0, 0
    for row in numstat.splitlines():
        plus, minus, path = row.split("\t", 2)
        files.append(path)
        binary = plus == "-"
        added += 0 if binary else int(plus)
        removed += 0 if binary else int(minus)
        lines.append(f"{path} | {'binary' if binary else f'+{plus} -{minus}'}")
    summary = [f"{len(files)} files changed, +{added} -{removed}"] if files else []
    text = "\n".join(lines + summary)
    if len(text) > MAX_DIFFSTAT_CHARS:
        text = text[:MAX_DIFFSTAT_CHARS] + "\n[... cut]"
    return files[:MAX_FILES], text


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

    def group(status: str) -> list[TaskBrief]:
        # One bounded query per group; the root (the spec itself) is not work.
        chosen = tracker.list(status, limit=MAX_TASKS_PER_GROUP + 1)
        return [_brief(t) for t in chosen if root is None or t.id != root.id][:MAX_TASKS_PER_GROUP]

    return WorkClaims(
        root=_brief(root) if root else None,
        open=group("open"),
        in_progress=group("in_progress"),
        blocked=group("blocked"),
        recently_closed=[_brief(t) for t in tracker.recently_closed(MAX_TASKS_PER_GROUP)],
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
        loop=loop_status(recent, inp.config.loop.loop_window, inp.config.loop.loop_threshold),
        budget=BudgetStatus(
            cost_usd=float(cost),
            max_cost_usd=budget.max_cost_usd,
            tokens_this_iteration=0,
            max_tokens_per_iteration=budget.max_tokens_per_iteration,
        ),
        learnings=learnings.active(inp.db, MAX_LEARNINGS),
    )


def loop_status(recent: list[IterationBrief], window: int, threshold: int) -> LoopStatus:
    """Detected when `threshold` of the last `window` iterations share a normalized
    intent and an outcome."""
    counts: dict[tuple[str, str], int] = {}
    for item in recent[:window]:
        if not item.intent:
            continue
        key = (re.sub(r"\s+", " ", item.intent.strip().lower()), item.outcome or "")
        counts[key] = counts.get(key, 0) + 1
    for (intent, outcome), count in counts.items():
        if count >= threshold:
            return LoopStatus(
                detected=True,
                detail=f"intent {intent!r} ended {outcome or 'unfinished'} {count} times "
                f"in the last {window} iterations",
            )
    return LoopStatus(detected=False, detail="no repetition")


def human_claims(db: Database) -> HumanClaims:
    rows = human_inputs.pending_except_kinds(db, NOT_FOR_ORIENT, MAX_HUMAN)
    pending = [
        HumanItem(
            id=i, kind=k, text=describe(HumanInput.model_validate(json.loads(p))), received_at=r
        )
        for i, k, p, r, _source_file in rows
    ]
    last = human_inputs.latest_kind(db, ("pause", "resume"))
    return HumanClaims(pending=pending, paused=last == "pause")


def describe(item: HumanInput) -> str:
    from soda.human.write import describe as inbox_describe

    return inbox_describe(item)
