"""Approval gates: a plan whose riskiest task reaches `[approval] risk_threshold`
(or a merge the gate may not make on its own) waits for a person
(`soda approve N` / `soda reject N`, where N is the iteration) and is rejected
when `[approval] timeout` passes without an answer, or when soda is asked to stop."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from soda.config import RISK_LEVELS, Config
from soda.contracts import IterationPlan
from soda.events import Events

if TYPE_CHECKING:
    from soda.human import HumanQueue


@dataclass(frozen=True)
class Verdict:
    approved: bool
    reason: str


def plan_risk(plan: IterationPlan) -> str:
    return max((task.risk for task in plan.tasks), key=RISK_LEVELS.index, default="none")


def needs_approval(plan: IterationPlan, threshold: str) -> bool:
    return RISK_LEVELS.index(plan_risk(plan)) >= RISK_LEVELS.index(threshold)


def await_approval(
    queue: HumanQueue,
    config: Config,
    events: Events,
    number: int,
    subject: IterationPlan | str,
    say: Callable[[str], None],
    should_stop: Callable[[], bool],
    poll_seconds: float = 0.5,
) -> Verdict:
    """Block until a person approves or rejects iteration `number`'s plan (or, with
    a string `subject`, whatever it describes: a merge the gate may not make on its
    own), the timeout passes, or `should_stop` says so. Reads the same queue as SENSE."""
    timeout = config.approval.timeout
    deadline = time.monotonic() + timeout
    if isinstance(subject, str):
        what, data = subject, {"iteration": number, "subject": subject}
    else:
        risk = plan_risk(subject)
        what, data = f"the plan is {risk} risk", {"iteration": number, "risk": risk}
    say(
        f"approval: {what}; waiting for `soda approve {number}` or "
        f"`soda reject {number}` (up to {timeout:.0f}s)"
    )
    events.emit("approval.waiting", data)
    noun = "merge" if isinstance(subject, str) else "plan"
    while True:
        answer = queue.take_verdict(number, noun)
        if answer is not None:
            return _verdict(events, number, *answer)
        if should_stop():
            return _verdict(events, number, False, "soda was asked to stop while waiting")
        if time.monotonic() >= deadline:
            return _verdict(events, number, False, f"no approval within {timeout:.0f}s")
        time.sleep(poll_seconds)


def _verdict(events: Events, number: int, approved: bool, reason: str) -> Verdict:
    events.emit("approval.verdict", {"iteration": number, "approved": approved, "reason": reason})
    return Verdict(approved, reason)
