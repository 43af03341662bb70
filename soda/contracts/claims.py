"""SENSE's output: what git, Trace, the project record and the inbox claim.

`Claims` (contract `claims`) is gathered at the start of every iteration and is
unverified until ORIENT's verifier checks it against the code. Agents read it as
`Claims.prompt_text()` (soda.contracts.claims_text): the same information as the
JSON, without indentation, nulls or empty fields, with 10-character SHAs; or as
`prompt_parts()`, most lasting first, for the prompt cache.
"""

from __future__ import annotations

from soda.contracts.base import Contract


class Commit(Contract):
    sha: str
    subject: str
    author: str
    date: str


class CodeClaims(Contract):
    branch: str
    """Milestone branch soda works on."""
    head: str
    """Commit at the tip of the milestone branch."""
    base_commit: str
    """Commit the milestone started from."""
    uncommitted: list[str]
    """Paths with uncommitted changes in the user's checkout (capped)."""
    commits: list[Commit]
    """Commits since the milestone base, newest first (capped)."""
    commits_total: int
    """How many commits there are since the base, capped list or not."""
    files_changed: list[str]
    """Files changed since the base (capped)."""
    diffstat: str
    """`git diff --stat` since the base (capped)."""
    tests: TestsBrief | None = None
    """The milestone tip's tests as last run on its tree (by the gate, DONE's check or
    `run_tests`); None when that tree was never tested."""


class TestFailure(Contract):
    __test__ = False  # not a pytest test class

    test: str
    """Test id."""
    first_lines: str
    """The first lines of the failure (bounded)."""


class TestsBrief(Contract):
    __test__ = False

    commit: str
    """The commit whose tree was tested (10 characters)."""
    summary: str
    """Counts: passed, failed, skipped, exit code."""
    failing: list[TestFailure]
    """Failing tests (capped), with the first lines of each failure."""
    failing_total: int


class TaskBrief(Contract):
    id: int
    title: str
    status: str
    reason: str | None
    """Why it is blocked or closed, when it is."""
    parent_id: int | None


class CommentBrief(Contract):
    task_id: int
    author: str
    body: str
    created_at: str


class WorkClaims(Contract):
    root: TaskBrief | None
    """The milestone's root task (the spec)."""
    open: list[TaskBrief]
    in_progress: list[TaskBrief]
    blocked: list[TaskBrief]
    recently_closed: list[TaskBrief]
    comments: list[CommentBrief]
    """Most recent comments, newest first."""


class IterationBrief(Contract):
    number: int
    intent: str | None
    decision: str | None
    outcome: str | None
    summary: str | None


class TaskAttempt(Contract):
    task_id: int | None
    title: str
    status: str
    """As ACT recorded it: completed, failed, gave_up, skipped."""
    summary: str | None
    """The executor's summary, or why the task gave up or was skipped (bounded)."""


class LastAct(Contract):
    """The newest iteration that acted: what it tried and what came of it."""

    iteration: int
    intent: str | None
    outcome: str
    """merged, no_changes, gate_failed, targets_failed, rejected, conflict or
    nothing_completed."""
    detail: str
    """The gate's or ACT's reason (bounded)."""
    tests: str
    """The gate's test summary after the change ('' when it did not get that far)."""
    failing: list[TestFailure]
    """Tests the gate held against the change (capped), with their first lines."""
    failing_total: int
    diffstat: str
    """What the attempt changed, merged or not (capped)."""
    tasks: list[TaskAttempt]


class LoopStatus(Contract):
    detected: bool
    """True when similar attempts went on after a warning: the run stops as STUCK."""
    detail: str
    """Which attempt repeated, how often and how it ended (for a person)."""
    warning: str | None
    """For ORIENT, once similar attempts (alike intent, same failure, same tasks or
    failing tests) reach the threshold: what was tried, how often, how it ended, and
    how many more such attempts stop the run. Plan something different."""


class BudgetStatus(Contract):
    cost_usd: float
    """Spent in this run so far."""
    max_cost_usd: float
    tokens_this_iteration: int
    max_tokens_per_iteration: int


class ProjectClaims(Contract):
    iteration: int
    """Number of the iteration being planned."""
    max_iterations: int
    recent: list[IterationBrief]
    """Most recent iterations, newest first."""
    loop: LoopStatus
    budget: BudgetStatus
    learnings: list[str]
    """Active learnings, newest first (capped)."""
    last_act: LastAct | None = None
    """The newest iteration that acted; None before the first."""


class HumanItem(Contract):
    id: int
    kind: str
    text: str
    """The person's words, or a rendering of a structured input."""
    received_at: str


class HumanClaims(Contract):
    pending: list[HumanItem]
    """Unapplied inputs from the queue, oldest first."""
    paused: bool
    """A person asked soda to pause."""


class CheckBrief(Contract):
    name: str
    """The check run's or commit status's name."""
    conclusion: str
    """failure, timed_out, cancelled, action_required or error."""
    excerpt: str
    """What it said, as the forge gives it (bounded; may be empty)."""


class ForgeClaims(Contract):
    """The milestone's pull request, as the forge showed it at SENSE."""

    pull_request: int
    """Its number on the forge."""
    draft: bool
    head: str
    """The commit the forge has as its head (10 characters)."""
    failing: list[CheckBrief]
    """Checks (CI) failing on the head commit: fix what they report."""
    pending: list[str]
    """Checks still running."""
    passed: int
    """How many checks passed."""


class Claims(Contract):
    """What the systems say at the start of an iteration: unverified."""

    code: CodeClaims
    work: WorkClaims
    project: ProjectClaims
    human: HumanClaims
    forge: ForgeClaims | None = None
    """The pull request (forge.mode draft or ready); None without one."""

    def prompt_text(self) -> str:
        """The claims as agents read them (see soda.contracts.claims_text)."""
        from soda.contracts.claims_text import claims_text  # it imports this module

        return claims_text(self)

    def prompt_parts(self) -> tuple[str, ...]:
        """The same text in parts, most lasting first, for the prompt cache: the
        learnings, the standing work, and what changes every iteration."""
        from soda.contracts.claims_text import claims_parts

        return claims_parts(self)
