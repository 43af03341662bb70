"""How things end, one string enum per vocabulary: an attempt at a task, a task of
the plan, an iteration (its outcome and its decision), a run, and Trace's task
status; with the tables that translate one into another (an attempt's status ->
the task's end -> the event that reports it and the report count it adds to; the
failure that names an iteration in which nothing merged) and the groupings other
modules ask about (unfinished outcomes, settled decisions, the outcomes that count
toward a loop). Each value is the text the database, the events and `--json` have
always held, since a `StrEnum` compares, hashes, formats and serializes as its
value: a row read back as plain text still matches its member. The tables are
checked on import, so a new member that one of them misses fails at once instead
of falling through a `.get` default somewhere downstream.
"""

from __future__ import annotations

from enum import StrEnum


class AttemptStatus(StrEnum):
    """How one attempt at a plan task ended (ACT's `Attempt.status`, the merge's
    `MergeOutcome.status`); a failed task's `TaskOutcome.failure` is one of these."""

    MERGED = "merged"
    """The gate passed and the work landed on the milestone (`merge_task`)."""
    NO_CHANGES = "no_changes"
    """The executor finished without changing a file: nothing to merge."""
    GAVE_UP = "gave_up"
    """The executor could not complete the task (an ordinary failure, never a HALT)."""
    GATE_FAILED = "gate_failed"
    """The gate held the merge commit back: a test the tip passed fails, or the
    evidence is missing (`merge_task`)."""
    TARGETS_FAILED = "targets_failed"
    """The gate held the merge commit back because target tests of the task fail,
    are skipped or are not found after the change, though nothing that passed
    before fails (`merge_task`; `PlanTask.target_tests`)."""
    CONFLICT = "conflict"
    """The work did not merge with the milestone, or the tip moved as it landed
    (`merge_task`)."""
    REJECTED = "rejected"
    """The gate needed a person, and the person said no (`merge_task`)."""
    CANCELLED = "cancelled"
    """A person's `cancel` reached the attempt while it ran or waited to merge."""
    WAITING = "waiting"
    """The executor asked a person; the work tree is kept for the answer."""

    @property
    def task_end(self) -> TaskEnd:
        """What the task's end is when its last attempt ended so."""
        return _TASK_END[self]


class TaskEnd(StrEnum):
    """How a task of the plan ended this iteration (`TaskOutcome.status`, each
    task's `status` in ACT's record)."""

    COMPLETED = "completed"
    """Its last attempt merged, or finished without changes."""
    GAVE_UP = "gave_up"
    """The executor gave up on its last attempt (Trace blocks the task)."""
    FAILED = "failed"
    """Its last attempt failed the gate, conflicted or was rejected (see `failure`)."""
    CANCELLED = "cancelled"
    """A person's `cancel` stopped it while it ran."""
    SKIPPED = "skipped"
    """It never ran: the plan was cancelled, or its dependencies did not finish or
    wait for an answer (`execute`'s cascade)."""
    WAITING = "waiting"
    """It waits for a person's answer; the next iteration resumes it."""

    @property
    def event(self) -> str:
        """The event ACT emits when a task ends so."""
        return _TASK_EVENT[self]

    @property
    def counted_as(self) -> str:
        """The iteration report's count this end adds to (`iteration_report.build`)."""
        return _REPORT_COUNT[self]


_TASK_END: dict[AttemptStatus, TaskEnd] = {
    AttemptStatus.MERGED: TaskEnd.COMPLETED,
    AttemptStatus.NO_CHANGES: TaskEnd.COMPLETED,
    AttemptStatus.GAVE_UP: TaskEnd.GAVE_UP,
    AttemptStatus.GATE_FAILED: TaskEnd.FAILED,
    AttemptStatus.TARGETS_FAILED: TaskEnd.FAILED,
    AttemptStatus.CONFLICT: TaskEnd.FAILED,
    AttemptStatus.REJECTED: TaskEnd.FAILED,
    AttemptStatus.CANCELLED: TaskEnd.CANCELLED,
    AttemptStatus.WAITING: TaskEnd.WAITING,
}

_TASK_EVENT: dict[TaskEnd, str] = {
    TaskEnd.COMPLETED: "act.task.completed",
    TaskEnd.GAVE_UP: "act.task.failed",
    TaskEnd.FAILED: "act.task.failed",
    TaskEnd.CANCELLED: "act.task.failed",
    TaskEnd.SKIPPED: "act.task.skipped",
    TaskEnd.WAITING: "act.task.waiting",
}

_REPORT_COUNT: dict[TaskEnd, str] = {
    TaskEnd.COMPLETED: "done",
    TaskEnd.GAVE_UP: "failed",
    TaskEnd.FAILED: "failed",
    TaskEnd.CANCELLED: "skipped",
    TaskEnd.SKIPPED: "skipped",
    TaskEnd.WAITING: "waiting",
}

RETRYABLE: frozenset[AttemptStatus] = frozenset(
    {
        AttemptStatus.GAVE_UP,
        AttemptStatus.GATE_FAILED,
        AttemptStatus.TARGETS_FAILED,
        AttemptStatus.CONFLICT,
    }
)
"""Attempts a task may try again (after a sibling's merge, or rewritten by the
retrier); every other status is the task's last."""


class IterationOutcome(StrEnum):
    """What an iteration came to (`iterations.outcome`): ACT's result when a plan
    ran, else DECIDE's, else how the iteration was cut short."""

    MERGED = "merged"
    """ACT: at least one task landed (also written by crash recovery for a merge
    the record missed)."""
    NO_CHANGES = "no_changes"
    """ACT: tasks finished, none changed a file."""
    GATE_FAILED = "gate_failed"
    """ACT: nothing merged; the gate held a task's work back."""
    TARGETS_FAILED = "targets_failed"
    """ACT: nothing merged; a task's target tests did not pass after its change
    (nothing else held it back)."""
    CONFLICT = "conflict"
    """ACT: nothing merged; a task's work conflicted with the milestone."""
    REJECTED = "rejected"
    """ACT: a person rejected the plan, or a merge that needed them."""
    NOTHING_COMPLETED = "nothing_completed"
    """ACT: no task finished (gave up, cancelled, skipped or waiting)."""
    AWAITING_APPROVAL = "awaiting_approval"
    """ACT: the plan waits for a person's approval and the iteration ended
    (`[approval] wait = "suspend"`); the next iteration acts on the verdict."""
    DONE = "done"
    """DECIDE: the spec is met, confirmed by the milestone tip's tests."""
    STUCK = "stuck"
    """DECIDE: soda cannot go on without a person."""
    DONE_REFUSED = "done_refused"
    """DECIDE said DONE, the tip's tests said no: the failures are the next work."""
    BUDGET = "budget"
    """The loop: a budget was spent before the iteration could start."""
    TRANSIENT = "transient"
    """The loop: a provider failure that outlived its retries."""
    HALTED = "halted"
    """The loop: a structural failure (a contract violation, a bad plan, a bad
    baseline); a `halts` row says what."""
    ERROR = "error"
    """The loop: a person must fix something (a user error, e.g. the API key)."""
    INTERRUPTED = "interrupted"
    """The loop: a signal stopped the iteration before it merged or found DONE."""
    CRASHED = "crashed"
    """The loop: an error nobody classified; its text is in `iterations.error`."""
    ABORTED = "aborted"
    """Crash recovery: the process died in the middle of the iteration."""
    PLAN_ONLY = "plan_only"
    """`soda plan`: SENSE, ORIENT and DECIDE recorded, nothing acted on (also when
    one of them failed)."""


FAILURE_OUTCOMES: dict[AttemptStatus, IterationOutcome] = {
    AttemptStatus.REJECTED: IterationOutcome.REJECTED,
    AttemptStatus.GATE_FAILED: IterationOutcome.GATE_FAILED,
    AttemptStatus.TARGETS_FAILED: IterationOutcome.TARGETS_FAILED,
    AttemptStatus.CONFLICT: IterationOutcome.CONFLICT,
}
"""The failed tasks' failures as the outcome of an iteration in which nothing
merged, most telling first (ACT names the iteration by the first one present)."""

UNFINISHED: frozenset[IterationOutcome] = frozenset(
    {
        IterationOutcome.INTERRUPTED,
        IterationOutcome.ABORTED,
        IterationOutcome.CRASHED,
        IterationOutcome.ERROR,
        IterationOutcome.TRANSIENT,
        IterationOutcome.BUDGET,
    }
)
"""Outcomes of an iteration cut short (a signal, a crash, a spent budget): the next
daemon wake goes on with the work even when nothing changed (`loop.wake`)."""

LOOP_OUTCOMES: dict[str, str] = {
    IterationOutcome.GATE_FAILED: "tests failed",
    IterationOutcome.TARGETS_FAILED: "tests failed",
    IterationOutcome.DONE_REFUSED: "tests failed",
    IterationOutcome.NO_CHANGES: "no progress",
    IterationOutcome.NOTHING_COMPLETED: "no progress",
    IterationOutcome.CONFLICT: "conflict",
    IterationOutcome.REJECTED: "rejected",
}
"""Outcomes that count toward a loop, by class (`loop.sense`'s loop detection),
keyed by the stored text it is looked up with. A merge is progress; transient
failures, interruptions, halts and limits are not the plan's doing."""


class IterationDecision(StrEnum):
    """How an iteration was routed (`iterations.decision`): DECIDE's kind by name,
    or HALT."""

    DONE = "DONE"
    """DECIDE: the spec is met."""
    STUCK = "STUCK"
    """DECIDE, a spent budget, or a plan suspended for approval: soda waits for a
    person."""
    CONTINUE = "CONTINUE"
    """DECIDE: the plan runs and the loop goes on."""
    HALT = "HALT"
    """The loop: a structural failure stopped it."""


SETTLED: frozenset[IterationDecision] = frozenset(
    {IterationDecision.DONE, IterationDecision.STUCK, IterationDecision.HALT}
)
"""Decisions after which the daemon waits for something new (`loop.wake`)."""


class RunStatus(StrEnum):
    """Where a run stands (`runs.status`): one `soda run`, or one daemon wake."""

    RUNNING = "running"
    """The run is under way (or its process died and recovery has not looked yet)."""
    STOPPED = "stopped"
    """It ended with work left: `soda run --once` after a CONTINUE, or a daemon stop."""
    DONE = "done"
    """Its last iteration found the spec met."""
    STUCK = "stuck"
    """Its last iteration needs a person."""
    HALT = "halt"
    """A structural failure halted it."""
    TRANSIENT = "transient"
    """A provider failure outlived its retries."""
    INTERRUPTED = "interrupted"
    """A signal stopped it in the middle of an iteration."""
    ERROR = "error"
    """A user error ended it (something a person must fix)."""
    CRASHED = "crashed"
    """An error nobody classified ended it."""
    ABORTED = "aborted"
    """Crash recovery found its process gone."""
    PLAN_ONLY = "plan_only"
    """A `soda plan` preview: one plan-only iteration, then the run ends."""


class Ending(StrEnum):
    """How one iteration (and so a run that stops after it) ended, for its host:
    `soda run`'s exit code, the daemon's and the fleet's next step
    (`soda.loop.policy`); a fleet run's history keeps it as text."""

    DONE = "done"
    CONTINUE = "continue"
    STUCK = "stuck"
    HALT = "halt"
    TRANSIENT = "transient"
    INTERRUPTED = "interrupted"

    @property
    def exit_code(self) -> int:
        """0 DONE (and CONTINUE after --once), 3 STUCK, 4 HALT, 5 transient."""
        return {Ending.STUCK: 3, Ending.HALT: 4, Ending.TRANSIENT: 5}.get(self, 0)

    @property
    def run_status(self) -> RunStatus:
        """The run's status when it ends here: one that would go on was stopped."""
        return RunStatus.STOPPED if self is Ending.CONTINUE else RunStatus(self.value)


class FleetStatus(StrEnum):
    """Where a fleet run stands, as its workflow's memo says (`soda fleet status`)."""

    STARTING = "starting"
    """Submitted; the workflow has not shown anything yet."""
    PLACING = "placing"
    """Waiting for a worker with a free slot."""
    RUNNING = "running"
    """An iteration runs on its worker."""
    WAITING = "waiting"
    """For a person (after STUCK or HALT, or a user error), a verdict on a plan
    or merge held for approval, or the next working window; no worker held."""
    PAUSED = "paused"
    """A person paused it; no worker held."""
    RETRYING = "retrying"
    """A transient failure: the next iteration starts after a short wait."""
    DONE = "done"
    """Ended: the spec is met and no input waits."""
    STUCK = "stuck"
    """Ended: it used its iterations (`max_iterations`)."""
    STOPPED = "stopped"
    """Ended: a person stopped it."""


ERROR_RUNS: tuple[RunStatus, ...] = (
    RunStatus.ERROR,
    RunStatus.ABORTED,
    RunStatus.CRASHED,
    RunStatus.TRANSIENT,
)
"""Run endings `soda status` reports as the last error (a HALT has its own row)."""


class TaskStatus(StrEnum):
    """A Trace task's status (`tasks.status`); `soda.trace` says which may follow
    which."""

    OPEN = "open"
    """Work not started, or back after an attempt that did not merge."""
    IN_PROGRESS = "in_progress"
    """ACT is working on it now (recovery reopens one left by a dead iteration)."""
    BLOCKED = "blocked"
    """It cannot go on until its reason is resolved (a conflict, an executor that
    gave up, an agent's verdict)."""
    CLOSED = "closed"
    """Done: its work merged, or ORIENT or a person closed it."""


def _check_complete() -> None:
    """Every member has its place in every table that translates its vocabulary."""
    failures = frozenset(a for a in AttemptStatus if a.task_end is TaskEnd.FAILED)
    tables: list[tuple[str, frozenset[StrEnum], frozenset[StrEnum]]] = [
        ("attempt -> task end", frozenset(_TASK_END), frozenset(AttemptStatus)),
        ("task end -> event", frozenset(_TASK_EVENT), frozenset(TaskEnd)),
        ("task end -> report count", frozenset(_REPORT_COUNT), frozenset(TaskEnd)),
        ("failure -> iteration outcome", frozenset(FAILURE_OUTCOMES), failures),
    ]
    for name, keys, members in tables:
        if keys != members:
            missing, extra = members - keys, keys - members
            raise RuntimeError(f"outcome table {name} out of step: {missing=} {extra=}")


_check_complete()
