"""Approval gates: a plan whose riskiest task reaches `[approval] risk_threshold`
waits for a person (`soda approve N` / `soda reject N`, where N is the iteration)
and is rejected when `[approval] timeout` passes without an answer."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from soda import inbox
from soda.config import RISK_LEVELS
from soda.contracts import IterationPlan
from soda.session import Session


@dataclass(frozen=True)
class Verdict:
    approved: bool
    reason: str


def plan_risk(plan: IterationPlan) -> str:
    return max((task.risk for task in plan.tasks), key=RISK_LEVELS.index, default="none")


def needs_approval(plan: IterationPlan, threshold: str) -> bool:
    return RISK_LEVELS.index(plan_risk(plan)) >= RISK_LEVELS.index(threshold)


def await_approval(
    session: Session,
    number: int,
    subject: IterationPlan | str,
    say: Callable[[str], None],
    poll_seconds: float = 0.5,
) -> Verdict:
    """Block until a person approves or rejects iteration `number`'s plan (or, with
    a string `subject`, whatever it describes: a merge the gate may not make on its
    own), the timeout passes, or soda is asked to stop. Reads the same queue as SENSE."""
    config = session.config
    deadline = time.monotonic() + config.approval.timeout
    if isinstance(subject, str):
        what, data = subject, {"iteration": number, "subject": subject}
    else:
        risk = plan_risk(subject)
        what, data = f"the plan is {risk} risk", {"iteration": number, "risk": risk}
    say(
        f"approval: {what}; waiting for `soda approve {number}` or "
        f"`soda reject {number}` (up to {config.approval.timeout:.0f}s)"
    )
    session.events.emit("approval.waiting", data)
    while True:
        inbox.ingest(config.state_dir, session.db, session.events, settle_seconds=0)
        for item in inbox.pending(session.db):
            if item.kind in ("approve", "reject") and item.payload.target == number:
                approved = item.kind == "approve"
                reason = item.payload.text or ("approved" if approved else "rejected")
                noun = "merge" if isinstance(subject, str) else "plan"
                verb = "approved" if approved else "rejected"
                inbox.mark_applied(session.db, [item.id], number, f"{noun} {verb}")
                return _verdict(session, number, approved, f"{item.kind}d by a person: {reason}")
        if session.stop_requested:
            return _verdict(session, number, False, "soda was asked to stop while waiting")
        if time.monotonic() >= deadline:
            return _verdict(
                session, number, False, f"no approval within {config.approval.timeout:.0f}s"
            )
        time.sleep(poll_seconds)


def _verdict(session: Session, number: int, approved: bool, reason: str) -> Verdict:
    session.events.emit(
        "approval.verdict", {"iteration": number, "approved": approved, "reason": reason}
    )
    return Verdict(approved, reason)
