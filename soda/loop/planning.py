"""Planning modes (`[loop] planning`): a plan of several tasks, or one task?

    auto    a cheap heuristic on the work at hand (open Trace tasks, the spec's
            unchecked items) decides; no model call
    model   the fast model decides (agent `planning_mode`), falling back to the
            heuristic on any failure of that call
    always  every iteration may plan a DAG of tasks
    never   one task per iteration: the planner is told so, and its plan is cut
            to one task without dependencies

ORIENT asks `choose` before its planner runs and passes `planner_inputs` to it;
`shape` cuts the plan it returns when one task was chosen. Every choice is an
event (`planning.mode`), and a cut plan says what it dropped (`planning.cut`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from soda.agent.definition import load_agent
from soda.contracts import Claims, IterationPlan, Orientation, PlanningChoice
from soda.contracts.plan_dag import batches
from soda.errors import StructuralError, TransientError

if TYPE_CHECKING:
    from soda.loop.context import Iteration
    from soda.loop.session import Session

AUTO_MIN_UNITS = 2
"""Units of work (open tasks, or unchecked spec items) from which `auto` plans
several tasks: one unit is one task's worth."""

ONE_TASK = (
    "Plan exactly ONE task this iteration (planning mode {mode}: {reason}). "
    "Pick the most important step; leave the rest as new_tasks for later iterations."
)

_UNCHECKED = re.compile(r"^\s*[-*+]\s+\[ \]", re.MULTILINE)
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\S", re.MULTILINE)


@dataclass(frozen=True)
class Choice:
    """What planning mode decided for this iteration."""

    mode: str
    multi_task: bool
    reason: str

    def planner_inputs(self) -> dict[str, str]:
        """The extra input the planning agent gets: nothing for a DAG, the
        one-task rule otherwise."""
        if self.multi_task:
            return {}
        return {"plan_size": ONE_TASK.format(mode=self.mode, reason=self.reason)}


def choose(session: Session, it: Iteration, claims: Claims) -> Choice:
    """Decide, by `[loop] planning`, whether this iteration plans several tasks."""
    mode = session.config.loop.planning
    if mode == "always":
        choice = Choice(mode, True, "planning = always")
    elif mode == "never":
        choice = Choice(mode, False, "planning = never")
    elif mode == "model":
        choice = _by_model(session, it, claims)
    else:
        choice = heuristic(session.spec_text(), claims, mode)
    it.events.emit(
        "planning.mode",
        {"mode": choice.mode, "multi_task": choice.multi_task, "reason": choice.reason},
    )
    return choice


def heuristic(spec: str, claims: Claims, mode: str = "auto") -> Choice:
    """Several tasks when the work at hand has at least AUTO_MIN_UNITS units: open
    or in-progress Trace tasks (the root is not work), or the spec's unchecked
    items (`- [ ]`; without checkboxes, its list items)."""
    tasks = len(claims.work.open) + len(claims.work.in_progress)
    unchecked = len(_UNCHECKED.findall(spec))
    items = unchecked if unchecked or "[x]" in spec.lower() else len(_BULLET.findall(spec))
    units = max(tasks, items)
    what = f"{tasks} open tasks, {items} spec items"
    if units >= AUTO_MIN_UNITS:
        return Choice(mode, True, f"{what}: worth a plan of tasks")
    return Choice(mode, False, f"{what}: one task is enough")


def _by_model(session: Session, it: Iteration, claims: Claims) -> Choice:
    """The fast model's choice; the heuristic's when the call fails in any way
    (a transient failure, a broken answer, a model that gave up)."""
    work = {
        "open_tasks": [t.title for t in claims.work.open + claims.work.in_progress],
        "blocked_tasks": [t.title for t in claims.work.blocked],
    }
    try:
        answer = it.runner.run(
            load_agent("planning_mode", PlanningChoice),
            {"spec": session.spec_text(), "work": work},
            None,
        ).value
    except (StructuralError, TransientError) as exc:
        fallback = heuristic(session.spec_text(), claims, "model")
        it.events.emit(
            "planning.fallback", {"error": type(exc).__name__, "message": str(exc)[:300]}
        )
        return Choice(
            "model", fallback.multi_task, f"heuristic after {type(exc).__name__}: {fallback.reason}"
        )
    return Choice("model", answer.multi_task, answer.reason)


def shape(it: Iteration, orientation: Orientation, choice: Choice) -> Orientation:
    """The orientation with its plan cut to one task when one task was chosen."""
    plan = orientation.iteration_plan
    if choice.multi_task or plan is None or len(plan.tasks) <= 1:
        return orientation
    cut = one_task(plan)
    dropped = [task.id for task in plan.tasks if task.id != cut.tasks[0].id]
    it.events.emit("planning.cut", {"kept": cut.tasks[0].id, "dropped": dropped})
    return orientation.model_copy(update={"iteration_plan": cut})


def one_task(plan: IterationPlan) -> IterationPlan:
    """The plan's first task without dependencies (the planner lists the most
    important first), alone."""
    first = next((t for t in plan.tasks if not t.depends_on), None) or batches(plan)[0][0]
    task = first.model_copy(update={"depends_on": []})
    return plan.model_copy(update={"tasks": [task]})
