"""The worker's activities: `place` (on the shared queue: take a run if a slot is
free), `iterate` (on this worker's own queue: one iteration, heartbeating, with
the person's inputs passed on to the inbox as they come) and `release`.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from soda.errors import UserError
from soda.fleet.iteration import Progress, run_one
from soda.fleet.state import HumanSignal, IterationReport, IterationRequest, Placement

BENIGN = ApplicationErrorCategory.BENIGN
HELD_IDLE_SECONDS = 600.0
"""A run this worker holds but has not iterated for this long frees its slot (its
workflow was ended from outside, without a release)."""


@dataclass
class WorkerActivities:
    """What one `soda worker` offers; `held` is the runs placed on it."""

    client: Client
    worker: str
    queue: str
    cache: Path
    slots: int
    held: dict[str, float] = field(default_factory=dict)

    def say(self, line: str) -> None:
        print(f"{self.worker}: {line}", flush=True)

    @activity.defn(name="place")
    async def place(self, workflow_id: str) -> Placement:
        """Take the run if a slot is free; refused otherwise (retried, so a worker
        with room takes it)."""
        now = time.monotonic()
        for held, seen in list(self.held.items()):
            if now - seen > HELD_IDLE_SECONDS:
                del self.held[held]
        if workflow_id not in self.held and len(self.held) >= self.slots:
            raise ApplicationError(  # benign: logged at debug, not with a traceback
                f"{self.worker} has no free slot", type="NoSlot", category=BENIGN
            )
        self.held[workflow_id] = now
        self.say(f"placed {workflow_id}")
        return Placement(self.worker, self.queue)

    @activity.defn(name="release")
    async def release(self, workflow_id: str) -> None:
        self.held.pop(workflow_id, None)

    @activity.defn(name="iterate")
    async def iterate(self, request: IterationRequest) -> IterationReport:
        self.held[request.workflow_id] = time.monotonic()
        progress = Progress()
        every = max(0.2, request.settings.heartbeat_seconds / 4)
        work = asyncio.create_task(
            asyncio.to_thread(run_one, self.cache, self.worker, request, progress, self.say)
        )
        handle = self.client.get_workflow_handle(request.workflow_id)
        try:
            while not work.done():
                activity.heartbeat(progress.phase)
                if progress.state_dir is not None:
                    await self._pass_on(handle, progress)
                await asyncio.wait({work}, timeout=every)
        except asyncio.CancelledError:
            progress.stop.set()  # the run moved on: stop at the next safe point
            await asyncio.wait({work})
            raise
        try:
            return work.result()
        except UserError as exc:  # one line here; the run waits for the person
            self.say(f"{request.workflow_id}: {exc}")
            raise ApplicationError(
                str(exc), type="UserError", non_retryable=True, category=BENIGN
            ) from None
        finally:
            self.held[request.workflow_id] = time.monotonic()

    async def _pass_on(self, handle: Any, progress: Progress) -> None:
        """Inputs a person sent while the iteration runs reach its inbox."""
        try:
            pending: list[HumanSignal] = await handle.query(
                "pending", result_type=list[HumanSignal]
            )
        except Exception:  # the server may be away: the next heartbeat asks again
            return
        for item in pending:
            progress.deliver(item.seq, item.document)
