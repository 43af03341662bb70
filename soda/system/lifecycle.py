"""How a soda process starts and stops honestly: readiness, activity, signals.

- `soda start` waits for the daemon's word: `state/daemon.ready` (its pid) once
  it holds the lock, has recovered and passed its preflight, or
  `state/daemon.error` (one line: why it did not start).
- While it runs, soda keeps `state/activity.json`: its pid and the commands it
  started that still run (test runs, agents' commands), so `soda stop` can say
  what it waits for and the next start can end what a `kill -9` left running.
- The daemon publishes when it will next look for work (`state/daemon.wake`,
  read by `next_wake` for `soda status`).
- `stop_signals` gives `soda run` and the daemon the same SIGTERM/SIGINT: the
  first kills the commands soda is running (a ten-minute test run, an agent's
  command: their results are thrown away) and stops at the next safe point, so
  soda stops within seconds; the second stops at once (every command soda
  started is killed, a notification too, then KeyboardInterrupt closes the
  records on the way out).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from soda.system import proc
from soda.system.proc import LiveCommand

READY_NAME = "daemon.ready"
ERROR_NAME = "daemon.error"
ACTIVITY_NAME = "activity.json"
WAKE_NAME = "daemon.wake"


# --- readiness -----------------------------------------------------------------


def clear_start_files(state_dir: Path) -> None:
    for name in (READY_NAME, ERROR_NAME):
        (state_dir / name).unlink(missing_ok=True)


def write_ready(state_dir: Path) -> None:
    _write_atomically(state_dir / READY_NAME, f"{os.getpid()}\n")


def write_error(state_dir: Path, message: str) -> None:
    """The reason the daemon did not start, as one line."""
    line = " ".join(message.split()) or "unknown error"
    _write_atomically(state_dir / ERROR_NAME, line + "\n")


def read_start(state_dir: Path) -> tuple[str, str] | None:
    """("ready", pid) or ("error", reason) once the daemon has said either."""
    for kind, name in (("error", ERROR_NAME), ("ready", READY_NAME)):
        with contextlib.suppress(OSError):
            text = (state_dir / name).read_text(encoding="utf-8", errors="replace").strip()
            if text:
                return kind, text
    return None


def publish_wake(state_dir: Path, text: str | None) -> None:
    """The daemon says when it will next look for work (None: it is stopping)."""
    path = state_dir / WAKE_NAME
    if text is None:
        path.unlink(missing_ok=True)
    else:
        _write_atomically(path, f"{os.getpid()}\t{text}\n")


def next_wake(state_dir: Path) -> str | None:
    """When the running daemon will next look for work, in words ("when a person
    writes ...", "at the next tick, within 5 s", ...); None when no daemon runs."""
    try:
        pid, _, text = (state_dir / WAKE_NAME).read_text(encoding="utf-8").partition("\t")
        os.kill(int(pid), 0)
    except (OSError, ValueError):
        return None
    return text.strip() or None


# --- activity --------------------------------------------------------------------


class ActivityFile:
    """`state/activity.json`, rewritten whenever a command soda started begins or ends
    (installed as soda.system.proc's observer by the session)."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / ACTIVITY_NAME

    def __call__(self, commands: list[LiveCommand]) -> None:
        data = {"pid": os.getpid(), "commands": [asdict(c) for c in commands]}
        _write_atomically(self.path, json.dumps(data))


def read_activity(state_dir: Path) -> tuple[int | None, list[LiveCommand]]:
    """The pid that wrote the activity file and the commands it had running."""
    try:
        data: Any = json.loads((state_dir / ACTIVITY_NAME).read_text(encoding="utf-8"))
        commands = [LiveCommand(**c) for c in data.get("commands", [])]
        return int(data["pid"]), commands
    except (OSError, ValueError, TypeError, KeyError):
        return None, []


def kill_leftovers(state_dir: Path, alive: Callable[[int], bool]) -> int:
    """End the commands a dead soda left running (its activity file names them);
    how many process groups were killed. Nothing is touched while it lives."""
    pid, commands = read_activity(state_dir)
    if pid is None or pid == os.getpid() or alive(pid):
        return 0
    killed = proc.kill_leftovers(commands)
    (state_dir / ACTIVITY_NAME).unlink(missing_ok=True)
    return killed


def describe_wait(commands: list[LiveCommand], test_command: str, phase: str | None) -> str:
    """What a stopping soda is waiting for, e.g. "the test run, 42 s"."""
    if commands:
        command = commands[0]
        seconds = max(0, round(time.time() - command.started))
        what = "the test run" if command.command == test_command else f"`{command.command}`"
        return f"{what}, {seconds} s"
    if phase:
        return f"the current iteration to reach a safe point (phase {phase})"
    return "the daemon to finish"


# --- signals ---------------------------------------------------------------------


@contextlib.contextmanager
def stop_signals(stop_soon: Callable[[], None]) -> Iterator[None]:
    """SIGTERM and SIGINT while the block runs: the first calls `stop_soon` (stop at
    the next safe point) and kills the commands running (`proc.interrupt_live`:
    their callers get Interrupted, no new one starts); the second kills every
    command soda started and raises KeyboardInterrupt (stop at once). Afterwards
    the previous handlers come back, unless a stop came: the process is then on
    its way out, and a later signal only kills what still runs (no traceback).
    Outside the main thread (signals cannot be caught there) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = 0

    def handler(signum: int, frame: object) -> None:
        nonlocal received
        received += 1
        if received > 1:
            proc.kill_live()
            raise KeyboardInterrupt
        stop_soon()  # first: a killed command's caller then sees the stop was asked
        proc.interrupt_live()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        if received:  # on its way out: a later signal kills what runs, never a traceback
            for sig in previous:
                signal.signal(sig, lambda signum, frame: proc.kill_live())
            # Python's own shutdown puts back the default handlers, which would
            # end the process by the signal (exit -2) after its record was made.
            atexit.register(_ignore_stop_signals)
        else:
            for sig, old in previous.items():
                signal.signal(sig, old)


def _ignore_stop_signals() -> None:
    """At exit after a stop: later SIGTERMs and SIGINTs are ignored (soda's own
    exit code stands)."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    temp.write_text(text, encoding="utf-8")
    temp.replace(path)
