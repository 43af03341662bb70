"""The real clock (the `Clock` port in soda.ports): wall time for records,
monotonic time for deadlines, and sleeping while waiting for a person."""

from __future__ import annotations

import time

from soda.store.db import now


class SystemClock:
    def now(self) -> str:
        """ISO-8601 UTC, the format of every timestamp column."""
        return now()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)
