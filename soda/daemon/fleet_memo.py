"""What a fleet run's memo (as `soda fleet status --json` shows it) says of its
issue, for soda.daemon.issue_fleet: the issue's state, and the comments written
back, in the one-machine path's words (soda.daemon.issues)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from soda.daemon import told
from soda.human import commands
from soda.store import tracker as rows

ENDED = ("failed", "terminated", "canceled", "timed_out")
"""How the server names a run that ended without its workflow's word."""


@dataclass(frozen=True)
class RunEnding:
    """Where a run's memo leaves its issue, when not working."""

    state: str
    """done, stuck, halted or cancelled (soda.store.tracker's states)."""
    number: int
    """The last iteration (0: none ran)."""
    reason: str


def state_of(described: dict[str, Any]) -> RunEnding | None:
    """The issue's state as its run's memo says it: done, stuck (after STUCK, a
    plan or merge waiting for a verdict, or its iterations used up), halted
    (after HALT, something a person must fix, or the workflow failed),
    cancelled (stopped); None while it works, or waits for its working window."""
    status = described.get("status") or {}
    now = str(status.get("status") or "")
    history = described.get("history") or []
    last = history[-1] if history else {}
    number, reason = int(last.get("number") or 0), str(last.get("reason") or "")
    ending = str(last.get("ending") or "")
    waiting_for = str(status.get("waiting_for") or "")
    found = {"done": "done", "stopped": "cancelled", "stuck": "stuck"}.get(now)
    if found is None and now in ENDED:
        found, reason = "halted", f"the fleet run {now}"
    elif found is None and now == "waiting" and waiting_for.startswith("a person to fix"):
        found, reason = "halted", waiting_for
    elif found is None and now == "waiting" and ending in ("stuck", "halt"):
        found = "stuck" if ending == "stuck" else "halted"
    return RunEnding(found, number, reason) if found is not None else None


def ended(described: dict[str, Any]) -> bool:
    status = str((described.get("status") or {}).get("status") or "")
    return status in ("done", "stopped", "stuck", *ENDED)


def start_text(item: rows.TrackerItem, run: str) -> str:
    return told.start(item.branch, run=run)


def ending_text(
    state: str, number: int, reason: str, described: dict[str, Any], branch: str, pr: int | None
) -> tuple[str, str]:
    """The event and the comment of a run's ending, in the one-machine path's words."""
    if state == "done":
        return "done", told.done(pr, branch)
    waits = described.get("approval")
    if state == "stuck" and waits:
        deadline = (described.get("status") or {}).get("approval_deadline")
        can_do = (
            f"What a person can do: `/soda approve` here approves the"
            f" {waits.get('what') or 'plan'} that waits for a verdict (until {deadline});"
            " a reply is read as a correction."
        )
        return f"stuck-{number}", told.stuck(number, reason, can_do)
    if state == "stuck":
        asked = (described.get("status") or {}).get("waiting_for")
        question = f"\n\nThe question soda asked: {asked}" if asked else ""
        can_do = (
            "What a person can do: reply here (a correction, or the answer to the question"
            f" below); soda takes the issue up again.{question}"
        )
        return f"stuck-{number}", told.stuck(number, reason, can_do)
    look = "`soda fleet status`, `soda fleet history`"
    return f"halted-{number}", told.halted(number, reason, look, "A reply here lets its run go on.")


class NoRun:
    """The record of an issue with no run yet: nothing waits for a verdict."""

    run = ""

    def look(self, number: int | None = None) -> str:
        return "`soda issues`"

    def waiting(self) -> commands.Waiting | None:
        return None

    def latest(self) -> int:
        return 0

    def takes_next(self) -> bool:
        return True

    def started(self, number: int) -> commands.Started | None:
        return None

    def running_plan(self, number: int) -> Any:
        return None

    def edit_problems(self, plan: Any) -> list[str]:
        return []

    def question(self, question_id: int) -> str | None:
        return None
