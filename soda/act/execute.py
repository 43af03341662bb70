"""EXECUTE: work the iteration plan's task DAG in topological batches.

Batches come from Kahn's algorithm. Each task is one executor run in the
iteration's worktree, followed by a commit of what it changed; a task that gives
up is rolled back to the commit before it, so only finished work reaches the
gate. Dependents of a task that did not finish are skipped, unless another of
their dependencies did finish (they then run with partial context, and are told
so). Tasks of one batch run one after another in this version; the batch
structure is kept so parallel worktrees can slot in without changing callers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from soda.contracts import ExecuteResult, IterationPlan, PlanTask
from soda.plan import batches


@dataclass
class TaskOutcome:
    task: PlanTask
    status: str
    """completed, gave_up, or skipped."""
    result: ExecuteResult | None = None
    reason: str = ""
    commit: str | None = None


@dataclass
class ExecutionReport:
    outcomes: list[TaskOutcome] = field(default_factory=list)

    @property
    def completed(self) -> list[TaskOutcome]:
        return [o for o in self.outcomes if o.status == "completed"]

    def to_json(self) -> list[dict[str, object]]:
        return [
            {
                "key": o.task.id,
                "task_id": o.task.task_id,
                "title": o.task.title,
                "status": o.status,
                "reason": o.reason,
                "commit": o.commit,
                "result": o.result.model_dump(mode="json") if o.result else None,
            }
            for o in self.outcomes
        ]


RunTask = Callable[[PlanTask, list[str]], TaskOutcome]
"""Runs one task; the list names dependencies that did not finish (partial context)."""


def execute_plan(
    plan: IterationPlan, run_task: RunTask, cancelled: Callable[[], bool]
) -> ExecutionReport:
    report = ExecutionReport()
    status: dict[str, str] = {}
    for batch in batches(plan):
        for task in batch:
            failed_deps = [dep for dep in task.depends_on if status.get(dep) != "completed"]
            if cancelled():
                outcome = TaskOutcome(task, "skipped", reason="plan cancelled by a person")
            elif task.depends_on and len(failed_deps) == len(task.depends_on):
                outcome = TaskOutcome(
                    task, "skipped", reason=f"dependencies did not finish: {failed_deps}"
                )
            else:
                outcome = run_task(task, failed_deps)
            status[task.id] = outcome.status
            report.outcomes.append(outcome)
    return report
