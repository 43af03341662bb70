"""EXECUTE: work the iteration plan's task DAG in topological batches.

Batches come from Kahn's algorithm. The tasks of one batch run at the same time,
up to `max_parallel`, each in a thread of its own (a task is mostly waiting: for
the model, for git and the jail, which are other processes); the next batch
starts when the whole batch has ended, so a dependent starts from the milestone
with its dependencies' work merged.

The cascade is smart: a task whose dependencies all failed is skipped; one with
some finished dependencies runs with what exists and is told which did not
finish; one that depends on a task waiting for a person's answer is skipped
until the answer comes. Every skip is reported (`skipped`, with its reason) as
it happens. A cancel is checked as each task starts; the caller's `run_task`
makes running tasks stop at their next turn. An exception in one task is raised
again once the batch's other tasks have ended.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from soda.contracts import ExecuteResult, IterationPlan, PlanTask
from soda.contracts.outcomes import AttemptStatus, TaskEnd
from soda.contracts.plan_dag import batches

if TYPE_CHECKING:
    from soda.repo.workspace import Workspace

WAITING_REASON = "waiting for an answer"
CANCELLED = "plan cancelled by a person"


@dataclass
class TaskOutcome:
    task: PlanTask
    status: TaskEnd
    """How it ended; for `failed`, `failure` says which failure."""
    result: ExecuteResult | None = None
    reason: str = ""
    commit: str | None = None
    """The task's own commit on its work branch."""
    merged_commit: str | None = None
    """The merge commit that landed it on the milestone; None if nothing landed."""
    failure: AttemptStatus | Literal[""] = ""
    """For `failed`: the last attempt's status (gate_failed, targets_failed,
    conflict or rejected); "" otherwise."""
    attempts: int = 1
    retries: list[str] = field(default_factory=list)
    """Why each retry was made (a sibling's merge, or the retrier's reason)."""
    after: str = ""
    """The gate's test summary for the last attempt that reached the gate."""
    failing: dict[str, str] = field(default_factory=dict)
    """Tests the gate held against the last attempt, with their first lines."""
    diffstat: str = ""
    """`git diff --stat` of the last attempt's own work (from its fork point)."""
    workspace: Workspace | None = None
    """For `waiting`: the work tree and branch kept for the answer."""

    def to_json(self) -> dict[str, object]:
        return {
            "key": self.task.id,
            "task_id": self.task.task_id,
            "title": self.task.title,
            "status": self.status,
            "reason": self.reason,
            "failure": self.failure,
            "commit": self.commit,
            "merged_commit": self.merged_commit,
            "attempts": self.attempts,
            "retries": self.retries,
            "diffstat": self.diffstat,
            "target_tests": list(self.task.target_tests),
            "result": self.result.model_dump(mode="json") if self.result else None,
        }


@dataclass
class ExecutionReport:
    outcomes: list[TaskOutcome] = field(default_factory=list)

    @property
    def completed(self) -> list[TaskOutcome]:
        return [o for o in self.outcomes if o.status == TaskEnd.COMPLETED]

    @property
    def merged(self) -> list[TaskOutcome]:
        return [o for o in self.outcomes if o.merged_commit]

    def to_json(self) -> list[dict[str, object]]:
        return [o.to_json() for o in self.outcomes]


RunTask = Callable[[PlanTask, list[str]], TaskOutcome]
"""Runs one task; the list names dependencies that did not finish (partial context)."""
OnSkip = Callable[[TaskOutcome], None]


def execute_plan(
    plan: IterationPlan,
    run_task: RunTask,
    cancelled: Callable[[], bool],
    max_parallel: int = 1,
    on_skip: OnSkip | None = None,
    stop: Callable[[], None] | None = None,
) -> ExecutionReport:
    """Run the plan's batches; `stop` is called when this thread is interrupted
    while tasks run (a signal), so they end at their next turn."""
    report = ExecutionReport()
    status: dict[str, TaskEnd] = {}

    def start(task: PlanTask, missing: list[str]) -> TaskOutcome:
        if cancelled():  # checked as the task starts, not when it was queued
            return _skipped(task, CANCELLED, on_skip)
        return run_task(task, missing)

    with ThreadPoolExecutor(max_workers=max_parallel, thread_name_prefix="soda-task") as pool:
        for batch in batches(plan):
            ready: list[tuple[PlanTask, list[str]]] = []
            ended: dict[str, TaskOutcome] = {}
            for task in batch:
                reason, missing = CANCELLED, list[str]()
                if not cancelled():
                    reason, missing = _cascade(task, status)
                if reason:
                    ended[task.id] = _skipped(task, reason, on_skip)
                else:
                    ready.append((task, missing))
            if len(ready) <= 1 or max_parallel == 1:
                for task, missing in ready:  # no thread needed: as before parallelism
                    ended[task.id] = start(task, missing)
            else:
                futures = {task.id: pool.submit(start, task, missing) for task, missing in ready}
                try:
                    errors = [e for f in futures.values() if (e := f.exception()) is not None]
                except BaseException:
                    if stop is not None:
                        stop()
                    raise
                if errors:
                    raise errors[0]
                ended.update({key: future.result() for key, future in futures.items()})
            for task in batch:
                status[task.id] = ended[task.id].status
                report.outcomes.append(ended[task.id])
    return report


def _cascade(task: PlanTask, status: dict[str, TaskEnd]) -> tuple[str, list[str]]:
    """(why `task` is skipped or "", the dependencies that did not finish)."""
    waiting = [dep for dep in task.depends_on if status.get(dep) == TaskEnd.WAITING]
    if waiting:
        return f"{WAITING_REASON} (dependencies {waiting})", []
    failed = [dep for dep in task.depends_on if status.get(dep) != TaskEnd.COMPLETED]
    if task.depends_on and len(failed) == len(task.depends_on):
        return f"dependencies did not finish: {failed}", failed
    return "", failed


def _skipped(task: PlanTask, reason: str, on_skip: OnSkip | None) -> TaskOutcome:
    outcome = TaskOutcome(task, TaskEnd.SKIPPED, reason=reason)
    if on_skip is not None:
        on_skip(outcome)
    return outcome
