"""Live events as server-sent events: `GET /stream?kind=PREFIX&after=ID`.

Each event goes out with its id, so a browser that reconnects sends
`Last-Event-ID` and misses nothing (the database is the source: rows newer than
that id are read again). A stream is bounded: it ends after STREAM_SECONDS (the
browser reconnects where it was) or when the browser goes away."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator

import anyio
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from soda.store import events as event_rows
from soda.web.templating import site_of
from soda.web.views import event_record

POLL_SECONDS = 0.2
"""How often the stream looks for new rows (a new event shows within this)."""
HEARTBEAT_SECONDS = 15.0
STREAM_SECONDS = 300.0
BATCH = 500
"""Events sent per look at most (a reconnect after a long gap catches up in turns)."""


def _start_id(request: Request, latest: int) -> int:
    """Where the stream starts: after `Last-Event-ID` (a reconnect), else after
    the `after` parameter (the page's newest event), else after the newest."""
    for value in (request.headers.get("last-event-id"), request.query_params.get("after")):
        try:
            return max(0, int(value)) if value is not None else latest
        except ValueError:
            continue
    return latest


def message(row: event_rows.EventRow) -> str:
    """One event as a server-sent event: its id and its record as JSON."""
    record = event_record(row)
    return f"id: {record['id']}\nevent: soda\ndata: {json.dumps(record, default=str)}\n\n"


async def stream(request: Request) -> Response:
    """`/stream`: the events after where the browser is, then each new one."""
    site = site_of(request)
    kind = (request.query_params.get("kind") or "").strip()[:80] or None
    latest = await run_in_threadpool(event_rows.last_id, site.db)
    last = _start_id(request, latest)

    async def body() -> AsyncIterator[str]:
        nonlocal last
        yield "retry: 1000\n\n"
        started = beat = time.monotonic()
        while time.monotonic() - started < STREAM_SECONDS:
            if await request.is_disconnected():
                return
            rows = await run_in_threadpool(event_rows.after, site.db, last, kind)
            for row in rows[:BATCH]:
                yield message(row)
                last = row[0]
            if rows:
                beat = time.monotonic()
            elif time.monotonic() - beat > HEARTBEAT_SECONDS:
                yield ": still here\n\n"
                beat = time.monotonic()
            await anyio.sleep(POLL_SECONDS)

    return StreamingResponse(
        body(),
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )
