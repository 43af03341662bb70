"""The plan as a DAG: the checks a schema cannot express, and its batches.

ORIENT validates a plan with `plan_problems` (its planner gets the problems
back for a bounded repair); ACT runs it batch by batch (`batches`, Kahn's
algorithm). Both phases use this module; neither imports the other.
"""

from __future__ import annotations

from collections.abc import Container

from soda.contracts import IterationPlan, PlanTask
from soda.errors import StructuralError

DEFAULT_MAX_TASKS = 8
"""A plan's default size cap ([plan] max_tasks)."""


def plan_problems(
    plan: IterationPlan, known_task_ids: Container[int], max_tasks: int = DEFAULT_MAX_TASKS
) -> list[str]:
    """Semantic checks the schema cannot express: at most `max_tasks` tasks, unique
    keys, known dependencies, known Trace tasks, no cycles."""
    problems: list[str] = []
    if len(plan.tasks) > max_tasks:
        problems.append(
            f"plan has {len(plan.tasks)} tasks, more than the limit of {max_tasks} "
            f"([plan] max_tasks): merge or drop tasks, or leave some for a later iteration"
        )
    keys = [task.id for task in plan.tasks]
    duplicates = sorted({key for key in keys if keys.count(key) > 1})
    if duplicates:
        problems.append(f"duplicate task keys {duplicates}")
    for task in plan.tasks:
        unknown = [dep for dep in task.depends_on if dep not in keys]
        if unknown:
            problems.append(f"task {task.id!r} depends on unknown keys {unknown}")
        if task.task_id is not None and task.task_id not in known_task_ids:
            problems.append(
                f"task {task.id!r} names Trace task {task.task_id}, which does not exist"
            )
    if not problems:
        try:
            batches(plan)
        except StructuralError as exc:
            problems.append(str(exc))
    return problems


def batches(plan: IterationPlan) -> list[list[PlanTask]]:
    """Kahn's algorithm: lists of tasks whose dependencies are all in earlier lists."""
    remaining = {task.id: set(task.depends_on) for task in plan.tasks}
    by_key = {task.id: task for task in plan.tasks}
    layers: list[list[PlanTask]] = []
    while remaining:
        ready = sorted(key for key, deps in remaining.items() if not deps)
        if not ready:
            raise StructuralError(f"plan has a dependency cycle among {sorted(remaining)}")
        layers.append([by_key[key] for key in ready])
        for key in ready:
            del remaining[key]
        for deps in remaining.values():
            deps.difference_update(ready)
    return layers
