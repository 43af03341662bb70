"""The daemon's small parts: log rotation, the
watcher's restart loop and killing a soda's process tree (soda.daemon.process puts them
together)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

from soda.system import proc
from soda.system.lifecycle import read_activity

LOG_NAME = "soda.log"
"""The daemon's log, in state/logs/."""
LOG_KEEP = 3
LOG_MAX_BYTES = 5 * 1024 * 1024


def rotate_log(path: Path) -> None:
    """Keep the log under LOG_MAX_BYTES at start: soda.log -> soda.log.1 -> ... .3"""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.stat().st_size < LOG_MAX_BYTES:
        return
    for n in range(LOG_KEEP - 1, 0, -1):
        older = path.with_name(f"{path.name}.{n}")
        if older.exists():
            older.replace(path.with_name(f"{path.name}.{n + 1}"))
    path.replace(path.with_name(f"{path.name}.1"))


def kill_tree(pid: int, state: Path) -> None:
    """SIGKILL a soda, every process below it and the commands its activity file names."""
    _, commands = read_activity(state)
    # A daemon started in the foreground leads no group: it is stopped and killed by
    # its pid; the tree below it is stopped first, so nothing it forks escapes.
    _signal(pid, signal.SIGSTOP)
    proc.kill_tree(pid)
    _signal(pid, signal.SIGKILL)
    proc.kill_leftovers(commands)


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


# --- the watcher ----------------------------------------------------------------

WATCH_BACKOFF = 0.5
"""Seconds before a failed watch starts again; doubles on each failure in a row."""
WATCH_MAX_BACKOFF = 30.0
WATCH_HEALTHY_SECONDS = 60.0
"""A watch that ran this long before failing starts the backoff over."""


def keep_watching(
    watch: Callable[[], None],
    stopping: threading.Event,
    on_error: Callable[[BaseException, float], None],
    on_restart: Callable[[], None],
    backoff: float = WATCH_BACKOFF,
    max_backoff: float = WATCH_MAX_BACKOFF,
    healthy_seconds: float = WATCH_HEALTHY_SECONDS,
) -> None:
    """Run `watch` until `stopping` is set. When it raises (or ends on its own),
    `on_error(error, wait)` is told, and after `wait` seconds (doubling up to
    `max_backoff` while failures follow each other) `on_restart()` runs and the
    watch starts again. Returns once `stopping` is set."""
    wait = backoff
    while not stopping.is_set():
        started = time.monotonic()
        try:
            watch()
        except Exception as exc:
            error: BaseException = exc
        else:
            if stopping.is_set():
                return
            error = RuntimeError("the watch ended on its own")
        if time.monotonic() - started >= healthy_seconds:
            wait = backoff
        on_error(error, wait)
        if stopping.wait(wait):
            return
        wait = min(wait * 2, max_backoff)
        on_restart()
