"""DECIDE is pure: every branch and the precedence between them, as a table."""

from __future__ import annotations

from typing import Any

import pytest

from soda.contracts import IterationPlan, LoopStatus, Orientation, PlanTask
from soda.loop.decide import Budget, Control, Kind, LoopState, decide

PLAN = IterationPlan(
    intent="add divide",
    approach="tdd",
    tasks=[
        PlanTask(
            id="a",
            task_id=2,
            title="t",
            description="d",
            depends_on=[],
            risk="low",
            tool_hints=[],
        )
    ],
)


def orientation(**overrides: Any) -> Orientation:
    base: dict[str, Any] = {
        "spec_satisfied": False,
        "actionable_work_exists": True,
        "confidence": "high",
        "summary": "all criteria met",
        "task_updates": [],
        "new_tasks": [],
        "gaps": [],
        "iteration_plan": PLAN,
        "stuck_reason": None,
        "learnings": [],
        "learning_verdicts": [],
    }
    return Orientation(**{**base, **overrides})


NO_LOOP = LoopStatus(detected=False, detail="no repetition", warning=None)
WARNING = LoopStatus(
    detected=False,
    detail='tried "add divide" 3 times',
    warning='you have tried "add divide" 3 times (iterations 3, 2, 1); it ended gate_failed',
)
LOOP = LoopStatus(
    detected=True,
    detail='tried "add divide" 4 times; it ended gate_failed',
    warning='you have tried "add divide" 4 times; the run stops as STUCK.',
)
OK = LoopState(iteration_in_run=1, max_iterations=5, loop=NO_LOOP)
WARNED = LoopState(iteration_in_run=1, max_iterations=5, loop=WARNING)
LOOPING = LoopState(iteration_in_run=1, max_iterations=5, loop=LOOP)
PAST_MAX = LoopState(iteration_in_run=6, max_iterations=5, loop=NO_LOOP)
AT_MAX = LoopState(iteration_in_run=5, max_iterations=5, loop=NO_LOOP)
BUDGET = Budget(
    cost_usd=1.0, max_cost_usd=10.0, tokens_this_iteration=10, max_tokens_per_iteration=100
)
SPENT = Budget(
    cost_usd=10.5, max_cost_usd=10.0, tokens_this_iteration=10, max_tokens_per_iteration=100
)
TOKENS = Budget(
    cost_usd=1.0, max_cost_usd=10.0, tokens_this_iteration=101, max_tokens_per_iteration=100
)
FREE = Control()
PAUSED = Control(paused=True)
STOP = Control(stop_requested=True)

CASES = [
    (
        "satisfied",
        orientation(spec_satisfied=True),
        OK,
        BUDGET,
        FREE,
        Kind.DONE,
        "all criteria met",
    ),
    ("satisfied beats budget", orientation(spec_satisfied=True), OK, SPENT, FREE, Kind.DONE, "met"),
    (
        "satisfied beats pause",
        orientation(spec_satisfied=True),
        OK,
        BUDGET,
        PAUSED,
        Kind.DONE,
        "met",
    ),
    ("stop", orientation(), OK, BUDGET, STOP, Kind.STUCK, "stopped by a person"),
    ("stop beats pause", orientation(), OK, BUDGET, Control(True, True), Kind.STUCK, "stopped"),
    ("paused", orientation(), OK, BUDGET, PAUSED, Kind.STUCK, "soda resume"),
    ("paused beats loop", orientation(), LOOPING, BUDGET, PAUSED, Kind.STUCK, "paused"),
    ("cost spent", orientation(), OK, SPENT, FREE, Kind.STUCK, "max_cost_usd $10.0000"),
    ("tokens spent", orientation(), OK, TOKENS, FREE, Kind.STUCK, "max_tokens_per_iteration 100"),
    ("budget beats loop", orientation(), LOOPING, SPENT, FREE, Kind.STUCK, "budget exhausted"),
    (
        "loop",
        orientation(),
        LOOPING,
        BUDGET,
        FREE,
        Kind.STUCK,
        'loop detected: tried "add divide" 4 times',
    ),
    (
        "loop warning continues",
        orientation(),
        WARNED,
        BUDGET,
        FREE,
        Kind.CONTINUE,
        'add divide (loop warning: tried "add divide" 3 times)',
    ),
    (
        "satisfied beats loop",
        orientation(spec_satisfied=True),
        LOOPING,
        BUDGET,
        FREE,
        Kind.DONE,
        "met",
    ),
    ("paused beats warning", orientation(), WARNED, BUDGET, PAUSED, Kind.STUCK, "paused"),
    (
        "max beats warning",
        orientation(),
        LoopState(6, 5, WARNING),
        BUDGET,
        FREE,
        Kind.STUCK,
        "reached max iterations",
    ),
    (
        "warning without work",
        orientation(actionable_work_exists=False, iteration_plan=None, stuck_reason="need a key"),
        WARNED,
        BUDGET,
        FREE,
        Kind.STUCK,
        "need a key",
    ),
    ("loop beats max", orientation(), LoopState(9, 5, LOOP), BUDGET, FREE, Kind.STUCK, "loop"),
    ("past max", orientation(), PAST_MAX, BUDGET, FREE, Kind.STUCK, "reached max iterations (5)"),
    ("at max still acts", orientation(), AT_MAX, BUDGET, FREE, Kind.CONTINUE, "add divide"),
    (
        "no actionable work",
        orientation(actionable_work_exists=False, iteration_plan=None, stuck_reason="need a key"),
        OK,
        BUDGET,
        FREE,
        Kind.STUCK,
        "need a key",
    ),
    (
        "no work, no reason",
        orientation(actionable_work_exists=False, iteration_plan=None),
        OK,
        BUDGET,
        FREE,
        Kind.STUCK,
        "soda tell",
    ),
    ("plan missing", orientation(iteration_plan=None), OK, BUDGET, FREE, Kind.STUCK, "soda tell"),
    (
        "plan empty",
        orientation(iteration_plan=PLAN.model_copy(update={"tasks": []})),
        OK,
        BUDGET,
        FREE,
        Kind.STUCK,
        "no work",
    ),
    (
        "unverifiable without plan",
        orientation(
            spec_satisfied="unverifiable",
            actionable_work_exists=False,
            iteration_plan=None,
            stuck_reason="needs the staging server",
        ),
        OK,
        BUDGET,
        FREE,
        Kind.STUCK,
        "staging server",
    ),
    (
        "unverifiable with plan",
        orientation(spec_satisfied="unverifiable"),
        OK,
        BUDGET,
        FREE,
        Kind.CONTINUE,
        "add divide",
    ),
    ("continue", orientation(), OK, BUDGET, FREE, Kind.CONTINUE, "add divide"),
]


@pytest.mark.parametrize(
    ("orient", "loop", "budget", "control", "kind", "fragment"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_decide(
    orient: Orientation,
    loop: LoopState,
    budget: Budget,
    control: Control,
    kind: Kind,
    fragment: str,
) -> None:
    decision = decide(orient, loop, budget, control)
    assert decision.kind is kind
    assert fragment in decision.reason


def test_decide_is_pure() -> None:
    args = (orientation(), OK, BUDGET, FREE)
    assert decide(*args) == decide(*args)
