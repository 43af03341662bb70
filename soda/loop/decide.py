"""DECIDE: a pure function from ORIENT's result and the loop's state to DONE, STUCK
or CONTINUE. No I/O, no clock, no randomness; every branch is table-tested."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from soda.contracts import LoopStatus, Orientation
from soda.contracts.outcomes import IterationOutcome


class Kind(enum.Enum):
    DONE = "done"
    STUCK = "stuck"
    CONTINUE = "continue"


_SETTLES: dict[Kind, IterationOutcome] = {
    Kind.DONE: IterationOutcome.DONE,
    Kind.STUCK: IterationOutcome.STUCK,
}
"""The outcome a decision records by itself; CONTINUE leaves it to ACT."""


@dataclass(frozen=True)
class Decision:
    kind: Kind
    reason: str
    outcome: IterationOutcome | None = None
    """The iteration's outcome when the decision alone settles it (None: ACT's)."""

    def settled_outcome(self) -> IterationOutcome | None:
        if self.outcome is not None:
            return self.outcome
        return _SETTLES.get(self.kind)


@dataclass(frozen=True)
class LoopState:
    iteration_in_run: int
    max_iterations: int
    loop: LoopStatus


@dataclass(frozen=True)
class Budget:
    cost_usd: float
    max_cost_usd: float
    tokens_this_iteration: int
    max_tokens_per_iteration: int

    @property
    def exhausted(self) -> bool:
        return (
            self.cost_usd > self.max_cost_usd
            or self.tokens_this_iteration > self.max_tokens_per_iteration
        )

    def describe(self) -> str:
        if self.cost_usd > self.max_cost_usd:
            return (
                f"budget exhausted: spent ${self.cost_usd:.4f} of max_cost_usd "
                f"${self.max_cost_usd:.4f} ([budget] in soda.toml); raise it to continue"
            )
        return (
            f"budget exhausted: {self.tokens_this_iteration:,} tokens this iteration, over "
            f"max_tokens_per_iteration {self.max_tokens_per_iteration:,} ([budget] in soda.toml)"
        )


@dataclass(frozen=True)
class Control:
    paused: bool = False
    stop_requested: bool = False


NO_WORK = (
    "ORIENT found no work it can do without a person; say what to do next with "
    '`soda tell "..."` or edit the spec'
)


def decide(orientation: Orientation, loop: LoopState, budget: Budget, control: Control) -> Decision:
    """Route the iteration. Precedence: a met spec wins over every limit; a person's
    control beats soda's own limits; limits beat a plan. A loop warning alone does
    not stop the run (ORIENT saw it in the claims); a loop detected does."""
    if orientation.spec_satisfied is True:
        return Decision(Kind.DONE, orientation.summary)
    if control.stop_requested:
        return Decision(Kind.STUCK, "stopped by a person; `soda run` or `soda start` continues")
    if control.paused:
        return Decision(Kind.STUCK, "paused by a person; `soda resume` continues")
    if budget.exhausted:
        return Decision(Kind.STUCK, budget.describe())
    if loop.loop.detected:  # still repeating after ORIENT was warned
        return Decision(
            Kind.STUCK,
            f"loop detected: {loop.loop.detail}; give soda a correction with `soda tell` "
            "or narrow the spec",
        )
    if loop.iteration_in_run > loop.max_iterations:
        return Decision(
            Kind.STUCK,
            f"reached max iterations ({loop.max_iterations}) without meeting the spec; "
            "review `soda history`, then run again or raise [loop] max_iterations",
        )
    plan = orientation.iteration_plan
    if not orientation.actionable_work_exists or plan is None or not plan.tasks:
        return Decision(Kind.STUCK, orientation.stuck_reason or NO_WORK)
    if loop.loop.warning is not None:  # a first hit: ORIENT was told, and may try once more
        return Decision(Kind.CONTINUE, f"{plan.intent} (loop warning: {loop.loop.detail})")
    return Decision(Kind.CONTINUE, plan.intent)
