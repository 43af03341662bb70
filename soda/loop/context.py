"""What the phases run with, split by how long it lives.

    Session    (soda.loop.session) one run of the process: config, repository,
               database, events, model runner, Trace, human queue, jail,
               checkout pool, milestone, clock
    Iteration  one iteration: its identity (`IterationRef`: number and row
               id), its record, its cancel flag, and the services bound to it
               (events, the call recorder and an agent runner recording to it,
               the human queue emitting its events): handed down, never left
               on a shared object for someone to read

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
from soda.store.runs import IterationRef

if TYPE_CHECKING:
    from soda.agent.recorder import CallRecorder
    from soda.agent.runtime import AgentRunner
    from soda.events import Events
    from soda.human import HumanQueue


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

    ref: IterationRef
    record: IterationRecord
    events: Events
    """Events recorded against this iteration."""
    recorder: CallRecorder
    """This iteration's model calls and totals."""
    runner: AgentRunner
    """Runs agents, recording to `recorder`."""
    human: HumanQueue
    """The person's inputs, its events recorded against this iteration."""
    cancel_requested: bool = False
    """Set by a person's `cancel` while the plan runs; pending tasks are skipped."""
    progress: list[str] = field(default_factory=list)
    """What this iteration did that counts as progress, in words, as the phases
    note it ("a person's input", "task 4 closed"); a merge is added at the end
    (soda.loop.progress)."""

    @property
    def number(self) -> int:
        return self.ref.number

    @property
    def id(self) -> int:
        return self.ref.id
