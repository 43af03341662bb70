"""`[budget] max_wall_seconds`: how long one run (a `soda run`, a daemon wake) may take.

The session starts a `WallLimit` with each run. When it passes, the limit does
what a first `soda stop` does to the commands running (`proc.interrupt_live`:
the test run or the executor's command is killed, its result thrown away, no new
command starts) and says so through `passed`, which the session folds into
`stop_requested`: every safe point (the agent runner's turns, the task threads,
a wait for the provider's limit) ends the iteration there. Unlike a stop, the
run then ends STUCK with `reason()` (soda.loop.run), and a daemon stays up: it
goes idle, and its next run may start commands again (`end`).
"""

from __future__ import annotations

import threading

from soda.system import proc

KEY = "budget.max_wall_seconds"


class WallLimit:
    """One run's wall-clock limit: `start` it with the run, `end` it with the run."""

    def __init__(self) -> None:
        self.passed = threading.Event()
        """Set once the run's time is up (cleared when the next run starts)."""
        self.seconds = 0.0
        self._timer: threading.Timer | None = None

    def start(self, seconds: float, stopping: bool) -> None:
        """A new run: its clock starts now (0 seconds: no limit)."""
        self.end(stopping)  # a timer that fired as the last run ended is undone too
        self.passed.clear()
        self.seconds = seconds
        if seconds > 0:
            timer = threading.Timer(seconds, self._expire)
            timer.daemon = True
            timer.name = "soda-wall-limit"
            self._timer = timer
            timer.start()

    def end(self, stopping: bool) -> None:
        """The run is over: its timer goes, and commands may start again unless a
        real stop is on its way (the daemon idles after a run out of time)."""
        self._cancel()
        if self.passed.is_set() and not stopping:
            proc.allow_commands()

    def reason(self) -> str:
        """Why the run ended, naming the key and what a person can do."""
        return (
            f"out of time: the run passed {KEY} = {self.seconds:g} s; the running command"
            f" was stopped. Raise [budget] max_wall_seconds in soda.toml (0: no limit), or"
            " run again: the next run or wake has the whole limit"
        )

    def _expire(self) -> None:
        self.passed.set()  # first: a killed command's caller then sees why
        proc.interrupt_live()

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
