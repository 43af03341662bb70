"""The worker's activities: `place` (on the shared queue: take a run if a slot is
free), `iterate` (on this worker's own queue: one iteration, heartbeating, with
the person's inputs passed on to the inbox as they come) and `release` (the
slot; and the run's checkout, once the run ended).
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

from soda.errors import TransientError, UserError
from soda.fleet import checkout
from soda.fleet.iteration import HeldRun, OutsideWindow, Progress, run_one
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
    runs: dict[str, HeldRun] = field(default_factory=dict)
    """The runs placed here (a slot each)."""

    def say(self, line: str) -> None:
        print(f"{self.worker}: {line}", flush=True)

    @activity.defn(name="place")
    async def place(self, workflow_id: str) -> Placement:
        """Take the run if a slot is free; refused otherwise (retried, so a worker
        with room takes it)."""
        now = time.monotonic()
        for ident, held in list(self.runs.items()):
            if now - held.seen > HELD_IDLE_SECONDS and ident != workflow_id:
                await self.release(ident)
        if workflow_id not in self.runs and len(self.runs) >= self.slots:
            raise ApplicationError(  # benign: logged at debug, not with a traceback
                f"{self.worker} has no free slot", type="NoSlot", category=BENIGN
            )
        self.runs.setdefault(workflow_id, HeldRun()).seen = now
        self.say(f"placed {workflow_id}")
        return Placement(self.worker, self.queue)

    @activity.defn(name="release")
    async def release(self, workflow_id: str, forget: bool = False) -> None:
        """Free the run's slot (it waits, or ended); with `forget` (it ended)
        its checkout leaves the cache too."""
        held = self.runs.pop(workflow_id, None)
        if held is not None:
            await asyncio.to_thread(held.close)
        if forget and await asyncio.to_thread(checkout.forget, self.cache, workflow_id):
            self.say(f"forgot {workflow_id}: its checkout is removed")

    async def close_all(self) -> None:
        for ident in list(self.runs):
            await self.release(ident)

    @activity.defn(name="iterate")
    async def iterate(self, request: IterationRequest) -> IterationReport:
        held = self.runs.setdefault(request.workflow_id, HeldRun())
        held.seen = time.monotonic()
        progress = Progress()
        every = max(0.2, request.settings.heartbeat_seconds / 4)
        work = asyncio.create_task(
            asyncio.to_thread(run_one, self.cache, self.worker, request, progress, self.say, held)
        )
        handle = self.client.get_workflow_handle(request.workflow_id)
        try:
            while not work.done():
                activity.heartbeat(progress.now())
                if progress.state_dir is not None:
                    await self._pass_on(handle, progress)
                await asyncio.wait({work}, timeout=every)
        except asyncio.CancelledError:
            held.stop.set()  # the run moved on: stop at the next safe point
            await asyncio.wait({work})
            raise
        try:
            return work.result()
        except UserError as exc:  # one line here; the run waits for the person
            self.say(f"{request.workflow_id}: {exc}")
            raise ApplicationError(
                str(exc), type="UserError", non_retryable=True, category=BENIGN
            ) from None
        except OutsideWindow as exc:  # the workflow waits for the window, holding no worker
            raise ApplicationError(
                str(exc), exc.opens, type="OutsideWindow", non_retryable=True, category=BENIGN
            ) from None
        except TransientError as exc:  # the workflow tries again later, afresh
            self.say(f"{request.workflow_id}: {exc}")
            raise ApplicationError(
                str(exc), type="TransientError", non_retryable=True, category=BENIGN
            ) from None
        finally:
            held.seen = time.monotonic()

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
