"""What the daemon's threads tell its loop (`Flags`, `take`), and how long an inbox
file must sit still before ingest takes it (`settle_delay`)."""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from soda.human.write import inbox_dir

SETTLE_SECONDS = 0.2
"""A file younger than this may still be open in an editor; ingest waits for it."""


def settle_delay(state_dir: Path, names: list[str]) -> float:
    """Seconds until the youngest of the inbox files `names` has been still for
    SETTLE_SECONDS (a little more, so the next ingest takes it): a wake comes
    when the file is ready, not a fixed settle time after the watcher saw it."""
    inbox = inbox_dir(state_dir)
    newest = 0.0
    for name in names:
        with contextlib.suppress(OSError):
            newest = max(newest, (inbox / name).stat(follow_symlinks=False).st_mtime)
    remaining = SETTLE_SECONDS - (time.time() - newest) if newest else SETTLE_SECONDS
    return min(max(remaining, 0.0), SETTLE_SECONDS) + 0.01


@dataclass(frozen=True)
class Flags:
    """What other threads and the signal handlers tell the loop thread. Each is a
    `threading.Event`: its writers only set it; the loop thread acts on it.

    - `wake`: look for work now. Set by the tick (APScheduler's thread), the watcher
      thread (a file landed, the spec changed, the watch restarted), a settle timer
      (an inbox file still being written has settled), the signal handlers (so
      the loop sees `stop` or `reload` at once) and the loop itself (CONTINUE: go
      again). The loop waits on it and clears it before each look.
    - `stop`: stop at the next safe point. Set by the first SIGTERM/SIGINT, and by
      the loop (a `stop` control, an interrupted iteration, on its way out); never
      cleared. Read by the loop, the watcher (it ends its watch) and the session
      (it is the session's `stopping`: the agent runner and the task threads stop
      at their next safe point).
    - `reload`: reload soda.toml. Set by SIGHUP; the loop takes it at its next look.
    - `spec_changed`: the spec file changed. Set by the watcher thread; the loop
      takes it at its next look (soda leaves idle, as for a new inbox file).

    The loop takes a flag (`take`) by clearing it before it acts, so a set that
    comes while it acts is kept for its next look, never lost.
    """

    wake: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)
    reload: threading.Event = field(default_factory=threading.Event)
    spec_changed: threading.Event = field(default_factory=threading.Event)


def take(flag: threading.Event) -> bool:
    """Clear `flag` and say whether it was set (the loop thread's side of Flags)."""
    if not flag.is_set():
        return False
    flag.clear()
    return True
