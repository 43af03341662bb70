"""Transitional: callers move to soda.human (soda.human.approval). Keeps the old
Session-based `await_approval` by delegating."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from soda.contracts import IterationPlan
from soda.human import HumanQueue
from soda.human.approval import Verdict, needs_approval, plan_risk
from soda.human.approval import await_approval as _await_approval

if TYPE_CHECKING:
    from soda.session import Session

__all__ = ["Verdict", "await_approval", "needs_approval", "plan_risk"]


def await_approval(
    session: Session,
    number: int,
    subject: IterationPlan | str,
    say: Callable[[str], None],
    poll_seconds: float = 0.5,
) -> Verdict:
    queue = HumanQueue(session.config.state_dir, session.db, session.events)
    return _await_approval(
        queue,
        session.config,
        session.events,
        number,
        subject,
        say,
        lambda: session.stop_requested,
        poll_seconds,
    )
