"""Waiting out a provider's rate limit: no model call until it resets.

A provider raises `ProviderLimit` when a rate limit (HTTP 429 with the time it
resets) outlasts its retry budget; a coding CLI's run reports the same from the
egress proxy or the CLI's own event stream. `wait_out` then waits on the
session's `Clock`, making no model call, and the caller asks again: the same
agent, the same turn, the same task. The wait is announced as `provider.waiting`
(with `until`, read by `soda status` and the web's Now page) and closed by
`provider.resumed`. It checks `should_stop` at least once a second, so
`soda stop` and `[budget] max_wall_seconds` end it (Interrupted: the iteration
stops at this safe point).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from soda.errors import Interrupted
from soda.system.clock import Clock, moment

WAITING = "provider.waiting"
RESUMED = "provider.resumed"
STEP_S = 1.0
"""Longest sleep between two looks at `should_stop`."""

Event = Callable[[str, dict[str, Any]], None]


def wait_out(
    seconds: float,
    why: str,
    who: str,
    clock: Clock,
    should_stop: Callable[[], bool],
    event: Event,
) -> None:
    """Wait `seconds` on `clock` for the provider's limit to reset, announcing it;
    raises Interrupted when `should_stop` says so first."""
    started = clock.monotonic()
    until = moment(_epoch(clock) + seconds)
    event(
        WAITING, {"agent": who, "until": until, "seconds": round(seconds, 1), "reason": why[:500]}
    )
    while (left := seconds - (clock.monotonic() - started)) > 0:
        if should_stop():
            event(RESUMED, {"agent": who, "until": until, "stopped": True})
            raise Interrupted(f"stopped while waiting for the provider's limit (until {until})")
        clock.sleep(min(STEP_S, left))
    event(RESUMED, {"agent": who, "until": until, "stopped": False})


def wait_until(
    until: float,
    why: str,
    who: str,
    clock: Clock,
    should_stop: Callable[[], bool],
    event: Event,
) -> None:
    """`wait_out` until `until` (seconds since the epoch) on `clock`."""
    wait_out(max(0.0, until - _epoch(clock)), why, who, clock, should_stop, event)


def waiting_line(until: str) -> str:
    """What `soda status` and the web say while soda waits."""
    return f"waiting for the provider's limit until {until}"


def _epoch(clock: Clock) -> float:
    """The clock's wall time in seconds since the epoch."""
    return datetime.fromisoformat(clock.now()).timestamp()
