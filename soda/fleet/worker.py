"""`soda worker`: one process polling the shared queue (workflows, placement)
and its own queue (the iterations of the runs placed on it), `--slots` at a time.

Its own queue's name is unique to the process: a run placed here stays here
while this process lives; once it is gone the run's next attempt is placed on
another worker (see soda.fleet.workflow). A run that ends has its checkout
removed from the cache (`release`); at start, the worker removes the ones
left unused for a day (`STALE_SECONDS`; only directories it marked as a run's).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import socket
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker

from soda.fleet import checkout
from soda.fleet.activities import WorkerActivities
from soda.fleet.workflow import SodaRun

STICKY_SECONDS = 2.0
STALE_SECONDS = 24 * 3600.0
"""A run's checkout in the cache not used for this long is removed when a worker
starts (the run ended while its worker was away, or went on elsewhere); a
run that comes back to this worker clones again."""


def worker_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(2)}"


async def serve(
    client: Client, task_queue: str, slots: int, cache: Path, ready: Path | None
) -> None:
    """Poll until SIGTERM or SIGINT, then finish the iterations in hand and stop."""
    name = worker_name()
    own = f"{task_queue}-worker-{name}"
    cache.mkdir(parents=True, exist_ok=True)
    swept = checkout.sweep(cache, STALE_SECONDS)  # a run that went on elsewhere, long ago
    offered = WorkerActivities(client, name, own, cache.resolve(), slots)
    shared = Worker(
        client,
        task_queue=task_queue,
        workflows=[SodaRun],
        activities=[offered.place],
        max_concurrent_activities=4,
        # A run's workflow tasks go to the worker that last ran them; once that
        # worker is gone, this long passes before any other worker takes them.
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=STICKY_SECONDS),
    )
    pinned = Worker(
        client,
        task_queue=own,
        activities=[offered.iterate, offered.release],
        activity_executor=ThreadPoolExecutor(max_workers=slots + 2),
        max_concurrent_activities=slots + 1,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with shared, pinned:
        offered.say(f"up: namespace {client.namespace}, queue {own}, {slots} slots")
        if swept:
            offered.say(f"removed {len(swept)} checkouts unused for a day: {', '.join(swept)}")
        if ready is not None:  # whole or absent: a reader never sees it half written
            partial = ready.with_name(ready.name + ".partial")
            partial.write_text(name, encoding="utf-8")
            partial.replace(ready)
        await stop.wait()
    await offered.close_all()
    offered.say("stopped")
