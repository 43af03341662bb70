"""What the phases run with, split by how long it lives.

    Session    (soda.loop.session) one run of the process: config, repository,
               database, events, model runner, Trace, human queue, jail,
               checkout pool, milestone, clock
    Iteration  one iteration: its number, its record, its cancel flag

What the tasks of one plan share while they run (the merge lock, the tip's
test report, the stop flag) is `soda.loop.act.task.PlanRun`; a task's own state
(its worktree, its executor session) lives in its attempt.

A phase takes what it needs from these and returns a value; the iteration's
record is written by the loop (`IterationRecord`), not from inside the phases.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlite_utils import Database

from soda.store import runs
from soda.store.db import now

if TYPE_CHECKING:
    from soda.agent.recorder import CallRecorder


@dataclass
class IterationRecord:
    """The iteration's row in `iterations`, written as each phase completes so a
    crash leaves a readable record (and the phase it died in)."""

    db: Database
    id: int
    number: int
    started: float = field(default_factory=time.monotonic)

    def save(self, **columns: Any) -> None:
        runs.save_iteration(self.db, self.id, columns)

    def finish(self, recorder: CallRecorder) -> None:
        self.save(
            ended_at=now(),
            duration_s=round(time.monotonic() - self.started, 3),
            tokens_in=recorder.tokens_in,
            tokens_out=recorder.tokens_out,
            cost_usd=recorder.cost_usd,
        )


@dataclass
class Iteration:
    """One iteration: what lives from SENSE to the end of ACT."""

    number: int
    record: IterationRecord
    cancel_requested: bool = False
    """Set by a person's `cancel` while the plan runs; pending tasks are skipped."""

    @property
    def id(self) -> int:
        return self.record.id
