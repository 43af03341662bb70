"""The human-input queue, whole: what a person says to soda and what soda does
about it. Nothing outside this package reads `state/inbox/`.

    soda tell / approve / pause ...  (write.write_input)    a person's own file
                  \\                                          /
                   -> state/inbox/<name> ------------------<
                          | ingest (files): settle, claim, parse, record
                          v
                   human_inputs row, pending  (rejected/ + .reason if unusable)
                          | routed once (routing.ROUTES, by kind and action)
       +------------------+-------------------+---------------------+
       v                  v                   v                     v
     SENSE              ORIENT              VERDICT               CONTROL
     apply_at_sense:    for_orient ->       take_verdict:         take_cancel (ACT),
     spec change,       claim -> read,      approve / reject      take_control_while_idle
     close/reopen/skip  marked applied      a waiting plan        (daemon): pause, resume,
     (constraints kept                      or merge              stop, cancel
      as learnings)
                          |
                          v
                   applied: applied_iteration + response

`HumanQueue` is the one implementation of the `HumanQueue` port; the rows'
SQL lives in `soda.store.human_inputs`. One other writer of pending rows:
soda.forge records a review comment from a person with write access as a
`correction` (source `forge`), which then takes the ORIENT route like any other.

May import: config, contracts, errors, events, repo, store, system, trace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sqlite_utils import Database

from soda.events import Events
from soda.human import apply, files, routing
from soda.human.files import IngestReport
from soda.human.parse import QueuedInput, queued
from soda.human.routing import IDLE_RESPONSES, Route
from soda.store import human_inputs

if TYPE_CHECKING:
    from soda.trace import Tracker

__all__ = [
    "IDLE_RESPONSES",
    "ControlAction",
    "HumanQueue",
    "IngestReport",
    "QueuedInput",
    "Route",
    "for_orient",
    "paused",
]

MAX_FOR_ORIENT = 20
"""Pending inputs shown to ORIENT at most, oldest first."""


def for_orient(db: Database, limit: int = MAX_FOR_ORIENT) -> list[QueuedInput]:
    """The pending inputs ORIENT sees as human claims, oldest first: those whose
    route is in `routing.ORIENT_SEES` (SENSE shows exactly these)."""
    kinds = routing.kinds_routed(routing.ORIENT_SEES)
    chosen = [queued(*row) for row in human_inputs.pending_of_kinds(db, kinds, limit)]
    return [item for item in chosen if routing.route(item.payload) in routing.ORIENT_SEES]


def paused(db: Database) -> bool:
    """Whether the newest pause or resume a person sent was a pause."""
    return human_inputs.latest_kind(db, routing.PAUSE_KINDS) == "pause"


@dataclass(frozen=True)
class ControlAction:
    """A control input taken while idle: its kind and what soda answered."""

    kind: str
    response: str
    source_file: str | None = field(default=None, compare=False)
    """Where it came from (an inbox file's name, or a face's source such as
    `tracker:issue-N:comment-ID`)."""


class HumanQueue:
    """The person's inputs for one state directory and database."""

    def __init__(self, state_dir: Path, db: Database, events: Events) -> None:
        self.state_dir = state_dir
        self.db = db
        self.events = events

    # --- the queue ------------------------------------------------------------

    def with_events(self, events: Events) -> HumanQueue:
        """The same queue, recording its events with `events` (an iteration's)."""
        return HumanQueue(self.state_dir, self.db, events)

    def ingest(self, settle_seconds: float = 0.3) -> IngestReport:
        """Record every settled inbox file as a pending input, or reject it."""
        return files.ingest(self.state_dir, self.db, self.events, settle_seconds)

    def pending(self) -> list[QueuedInput]:
        """Inputs waiting to be applied, oldest first."""
        return [queued(*row) for row in human_inputs.pending(self.db)]

    def claim(self, ids: list[int], iteration: int) -> int:
        """Mark pending inputs as taken up by `iteration`; returns how many changed."""
        return human_inputs.claim(self.db, ids, iteration)

    def mark_applied(self, ids: list[int], iteration: int, response: str) -> int:
        """Record what soda did about the inputs; returns how many changed.

        Pending inputs may be applied without a claim (control inputs act at once)."""
        return human_inputs.mark_applied(self.db, ids, iteration, response)

    def release_claims(self) -> int:
        """After a crash: return every claimed input to pending; returns how many."""
        return human_inputs.release_claims(self.db)

    def recover_claimed_files(self) -> list[Path]:
        """After a crash: files stranded mid-claim go on or back; returns where."""
        return files.recover_claimed_files(self.state_dir, self.db, self.events)

    def pending_count(self) -> int:
        return human_inputs.pending_count(self.db)

    # --- routes ---------------------------------------------------------------

    def for_orient(self, limit: int = MAX_FOR_ORIENT) -> list[QueuedInput]:
        """The pending inputs ORIENT sees as human claims, oldest first."""
        return for_orient(self.db, limit)

    def paused(self) -> bool:
        """Whether the newest pause or resume a person sent was a pause."""
        return paused(self.db)

    def apply_at_sense(
        self,
        tracker: Tracker,
        spec_path: Path,
        store_learnings: Callable[[list[str], str, int | None], None],
        iteration: int,
    ) -> list[str]:
        """Apply what needs no judgment (spec changes, task overrides, answers to
        agents' questions) and keep constraints as learnings; return one line per
        action taken."""
        done: list[str] = []
        for item in self.pending():
            if routing.key(item.payload) in routing.REMEMBERED:
                learned = apply.learning(item.payload)
                if learned:
                    store_learnings([learned], "human", None)
            where = routing.route(item.payload)
            if where is Route.ANSWER:
                response = apply.record_answer(item.payload, self.db, self.events)
            elif where is Route.SENSE:
                response = apply.apply_input(item.payload, tracker, spec_path)
            else:
                continue
            self.mark_applied([item.id], iteration, response)
            self.events.emit("human.applied", {"id": item.id, "response": response})
            done.append(response)
        return done

    def take_cancel(self, iteration: int) -> bool:
        """Ingest, then take every pending `cancel`; True when there was one."""
        self.ingest()
        cancelled = False
        for item in self._routed(Route.CONTROL):
            if item.kind == "cancel":
                self.mark_applied([item.id], iteration, "cancelled the running plan")
                self.events.emit("act.cancelled", {"input": item.id})
                cancelled = True
        return cancelled

    def take_control_while_idle(self, next_iteration: int) -> list[ControlAction]:
        """Take every pending control input (no iteration runs, so a cancel has
        nothing to cancel); the caller changes its own state by their kinds."""
        taken = []
        for item in self._routed(Route.CONTROL):
            response = IDLE_RESPONSES[item.kind]
            self.mark_applied([item.id], next_iteration, response)
            self.events.emit("control", {"kind": item.kind, "response": response})
            taken.append(ControlAction(item.kind, response, item.source_file))
        return taken

    def take_verdict(self, iteration: int, noun: str = "plan") -> tuple[bool, str] | None:
        """Ingest at once, then take a person's approve or reject of what
        `iteration` waits for (its plan, or a `noun` such as "merge"); None if
        there is none yet. Returns (approved, reason)."""
        self.ingest(settle_seconds=0)
        for item in self._routed(Route.VERDICT):
            if item.payload.target != iteration:
                continue
            approved = item.kind == "approve"
            reason = item.payload.text or ("approved" if approved else "rejected")
            verb = "approved" if approved else "rejected"
            self.mark_applied([item.id], iteration, f"{noun} {verb}")
            return approved, f"{verb} by a person: {reason}"
        return None

    def _routed(self, where: Route) -> list[QueuedInput]:
        return [item for item in self.pending() if routing.route(item.payload) is where]
