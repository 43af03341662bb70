"""Time, behind one seam: wall time for records, monotonic time for deadlines,
and the sleep of every wait (a person's approval, a stopping daemon, `soda events
-f`). `Clock` is what those waits take; `SystemClock` the real one.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol


def utc_now() -> str:
    """Current UTC time as an ISO-8601 string, the format of every timestamp column."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def moment(seconds: float) -> str:
    """Seconds since the epoch as ISO-8601 UTC, to the second (a deadline shown)."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


class Clock(Protocol):
    def now(self) -> str:
        """ISO-8601 UTC."""
        ...

    def monotonic(self) -> float: ...
    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> str:
        return utc_now()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


SYSTEM_CLOCK = SystemClock()
"""The default for a wait that is not handed another clock."""
