"""SENSE: the four claim groups (code, work, project, human), gathered by bounded,
deterministic queries. No LLM. Every list is capped so that what SENSE returns,
and how long it takes, does not grow with the repository's age."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from git import Repo
from sqlite_utils import Database

from soda.config import Config, LoopConfig
from soda.contracts import (
    BudgetStatus,
    Claims,
    CodeClaims,
    CommentBrief,
    Commit,
    HumanClaims,
    HumanItem,
    IterationBrief,
    LoopStatus,
    ProjectClaims,
    TaskBrief,
    WorkClaims,
)
from soda.contracts.outcomes import LOOP_OUTCOMES, TaskStatus
from soda.errors import GitError
from soda.gate.evidence import json_object, last_act, tip_tests
from soda.human import for_orient, paused
from soda.human.write import describe
from soda.repo import digest
from soda.repo.workspace import branch_head
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


# --- loop detection ------------------------------------------------------------
#
# An attempt is one of the run's recent iterations. Two attempts are the same when
# their intents use mostly the same words (after normalization), they ended in the
# same class of failure, and, where both sides record them, they worked on the same
# Trace tasks or ended with the same failing tests. `loop_threshold` such attempts
# in the window warn ORIENT; `warned_repeats` more stop the run as STUCK. Which
# outcomes count, and as which class, is `soda.contracts.outcomes.LOOP_OUTCOMES`.

MAX_INTENT_CHARS = 200
MAX_FAILING_NAMED = 3

_STOPWORDS = frozenset(
    """a an the to of in on for with and or so that this these those it its by from into
    as at be is are was were all any some new again also then now via which when
    py js ts rs rb md txt toml json""".split()  # noqa: SIM905 (a word list reads best as text)
)
_GENERIC = frozenset(
    """function functions method methods feature support code logic implementation
    functionality properly correctly""".split()  # noqa: SIM905
)
"""Words that say nothing about which work it is ("implement the divide function")."""
_DROPPED = _STOPWORDS | _GENERIC


def _stem(word: str) -> str:
    """A crude stem, applied the same way to both sides: divide/divides/divided -> divid."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and not word.endswith("ss") and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


_SYNONYMS = {
    _stem(word): canonical
    for canonical, words in {
        "add": "add implement create write written introduce build make provide define",
        "fix": "fix repair correct resolve debug patch",
        "change": "change update modify adjust edit rework",
        "remove": "remove delete drop eliminate",
    }.items()
    for word in words.split()
}


def intent_words(intent: str) -> frozenset[str]:
    """The intent as a set of normalized words: camelCase and snake_case split,
    punctuation, stopwords and generic words dropped, stemmed, verbs of the same
    meaning merged ("implement" = "add")."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", intent).lower()
    words = (w for w in re.findall(r"[a-z0-9]+", spaced) if w not in _DROPPED)
    return frozenset(_SYNONYMS.get(stem, stem) for stem in map(_stem, words))


def intent_similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard similarity of two word sets (1.0 for two empty ones)."""
    union = a | b
    return len(a & b) / len(union) if union else 1.0


@dataclass(frozen=True)
class Attempt:
    """One recent iteration as loop detection compares it."""

    number: int
    intent: str
    outcome: str | None
    tasks: frozenset[int] = frozenset()
    """Trace tasks it worked on (ACT's record, else its plan)."""
    failing: frozenset[str] = frozenset()
    """Tests the gate held against it."""
    words: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "words", intent_words(self.intent))


def same_attempt(a: Attempt, b: Attempt, similarity: float) -> bool:
    """Similar intents, the same failure class, and (when both record them) the
    same Trace tasks or the same failing tests."""
    kind = LOOP_OUTCOMES.get(a.outcome or "")
    if kind is None or kind != LOOP_OUTCOMES.get(b.outcome or ""):
        return False
    if intent_similarity(a.words, b.words) < similarity:
        return False
    evidence = []
    if a.tasks and b.tasks:
        evidence.append(a.tasks == b.tasks)
    if a.failing and b.failing:
        evidence.append(a.failing == b.failing)
    return any(evidence) if evidence else True


def recent_attempts(db: Database, run_id: int, before: int, window: int) -> list[Attempt]:
    """The run's last `window` iterations before `before`, newest first, in one query.
    The window is picked walking the run's index backwards (ids grow with numbers), so
    the cost does not grow with the run's age; the JSON records are read only for
    these rows, and only for outcomes that can count toward a loop."""
    rows = runs.window_records(db, run_id, before, window, LOOP_OUTCOMES)
    attempts = []
    for number, intent, outcome, act_json, orient_json in rows:
        if not intent:
            continue
        act = json_object(act_json)
        tasks = _task_ids(act.get("tasks"))
        if not tasks:
            plan = json_object(orient_json).get("iteration_plan")
            tasks = _task_ids(plan.get("tasks") if isinstance(plan, dict) else None)
        failing = act.get("failing")
        attempts.append(
            Attempt(
                number=number,
                intent=intent,
                outcome=outcome,
                tasks=tasks,
                failing=frozenset(failing) if isinstance(failing, dict) else frozenset(),
            )
        )
    return attempts


def _task_ids(tasks: object) -> frozenset[int]:
    if not isinstance(tasks, list):
        return frozenset()
    return frozenset(
        t["task_id"] for t in tasks if isinstance(t, dict) and isinstance(t.get("task_id"), int)
    )


def loop_status(attempts: list[Attempt], config: LoopConfig) -> LoopStatus:
    """The largest group of same attempts among the last `loop_window` iterations
    (newest first): `loop_threshold` of them warn ORIENT, `warned_repeats` more are
    a loop."""
    window = attempts[: config.loop_window]
    group: list[Attempt] = []
    for anchor in window:
        same = [a for a in window if same_attempt(anchor, a, config.intent_similarity)]
        if len(same) > len(group):
            group = same
    count = len(group)
    if count < config.loop_threshold:
        return LoopStatus(detected=False, detail="no repetition", warning=None)
    intent = group[0].intent.strip()
    if len(intent) > MAX_INTENT_CHARS:
        intent = intent[:MAX_INTENT_CHARS] + "..."
    numbers = ", ".join(str(a.number) for a in group)
    ended = " or ".join(dict.fromkeys(a.outcome or "" for a in group))
    failing = sorted(frozenset().union(*(a.failing for a in group)))
    if failing:
        extra = len(failing) - MAX_FAILING_NAMED
        named = ", ".join(failing[:MAX_FAILING_NAMED]) + (f" +{extra} more" if extra > 0 else "")
        ended += f" (failing: {named})"
    tried = f'"{intent}" {count} times (iterations {numbers}); it ended {ended}'
    left = config.loop_threshold + config.warned_repeats - count
    if left > 0:
        more = (
            "One more similar attempt stops" if left == 1 else f"{left} more similar attempts stop"
        )
        return LoopStatus(
            detected=False,
            detail=f"tried {tried}",
            warning=f"you have tried {tried}. {more} the run as STUCK: change the approach "
            "(a smaller step, another task, a different fix), or set actionable_work_exists "
            "false and say what a person must do.",
        )
    after = f", {count - config.loop_threshold} after a warning" if config.warned_repeats else ""
    return LoopStatus(
        detected=True,
        detail=f"tried {tried}{after}",
        warning=f"you have tried {tried}; the run stops as STUCK.",
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
