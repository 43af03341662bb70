"""A long-running child read line by line as it speaks, with watchdogs: a coding
CLI run as soda's executor (`soda.agent.backends`).

`run_watched` is `soda.system.proc.run`'s sibling for a child whose output is a
stream of events: each stdout line goes to `on_line` as it arrives (which says
whether it was the child's final word), stderr is kept bounded, and the child's
whole process tree is killed by the first of

- the deadline (`limits.deadline_s` since the start),
- the idle limit (`limits.idle_s` without a line),
- the grace period (`limits.grace_s` after the final word, for a child that
  hangs after it has answered),
- `stop()` returning a reason (a refused budget, a failing API, a cancel).

The child is registered with the live commands like every other (a stop signal
kills it and its caller sees Interrupted; a restart after kill -9 ends it).
"""

from __future__ import annotations

import contextlib
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from soda.errors import Interrupted
from soda.system import proc
from soda.system.capture import Capture

POLL_S = 0.05
"""How often the watchdogs look when no line arrives."""


@dataclass(frozen=True)
class WatchLimits:
    deadline_s: float
    idle_s: float
    grace_s: float


@dataclass(frozen=True)
class Watched:
    """How the child ended: its exit code (None when soda killed it) and why it
    was killed ("" when it exited by itself)."""

    returncode: int | None
    killed: str
    stderr: str
    duration_s: float
    lines: int


def run_watched(
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    on_line: Callable[[str], bool],
    limits: WatchLimits,
    stop: Callable[[], str | None] = lambda: None,
    label: str = "",
) -> Watched:
    """Run `argv` under the watchdogs above; never raises for the child's own
    failure (the result says it), raises Interrupted when a stop signal killed it."""
    if proc._stopping:
        raise Interrupted(f"soda is stopping: `{label or argv[0]}` was not started")
    started = time.monotonic()
    child = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    lines: queue.Queue[bytes | None] = queue.Queue()
    errors = Capture(8_000)
    threading.Thread(target=_read_lines, args=(child.stdout, lines), daemon=True).start()
    threading.Thread(target=errors.drain, args=(child.stderr,), daemon=True).start()
    shown = label or " ".join(argv[-3:])
    proc._changed(
        child.pid, proc.LiveCommand(child.pid, shown, time.time(), proc.start_ticks(child.pid))
    )
    count, killed = 0, ""
    try:
        count, killed = _watch(child, lines, on_line, limits, stop, started)
    except BaseException:
        proc.kill_tree(child.pid)
        with contextlib.suppress(Exception):
            child.wait(proc.KILL_GRACE_S)
        raise
    finally:
        proc._changed(child.pid, None)
        interrupted = child.pid in proc._interrupted
        proc._interrupted.discard(child.pid)
    if interrupted:
        raise Interrupted(f"stopped by a signal: `{shown}` was killed")
    return Watched(
        None if killed else child.returncode,
        killed,
        errors.text(),
        round(time.monotonic() - started, 3),
        count,
    )


def _watch(
    child: subprocess.Popen[bytes],
    lines: queue.Queue[bytes | None],
    on_line: Callable[[str], bool],
    limits: WatchLimits,
    stop: Callable[[], str | None],
    started: float,
) -> tuple[int, str]:
    """Hand lines to `on_line` until the output ends; kill the tree on a limit."""
    last = started
    final_at: float | None = None
    count = 0
    while True:
        try:
            raw = lines.get(timeout=POLL_S)
        except queue.Empty:
            raw = b""
        now = time.monotonic()
        if raw is None:  # the output closed: the child is ending
            break
        if raw:
            count += 1
            last = now
            if on_line(raw.decode("utf-8", "replace").strip()) and final_at is None:
                final_at = now
        reason = stop()
        if reason is None:
            reason = _limit(now, started, last, final_at, limits)
        if reason is not None:
            proc.kill_tree(child.pid)
            child.wait()
            return count, reason
    # Output closed; the child may still linger (a hang after its result).
    grace = limits.grace_s if final_at is not None else min(limits.idle_s, limits.grace_s)
    try:
        child.wait(timeout=max(grace, POLL_S))
    except subprocess.TimeoutExpired:
        proc.kill_tree(child.pid)
        child.wait()
        return count, "hung after its output ended"
    # Whatever it left running in its group (the group id cannot be reused while
    # a member lives, so this never reaches another process).
    proc._signal_group(child.pid, signal.SIGKILL)
    return count, ""


def _limit(
    now: float, started: float, last: float, final_at: float | None, limits: WatchLimits
) -> str | None:
    if now - started > limits.deadline_s:
        return f"deadline: still running after {limits.deadline_s:g} s"
    if final_at is not None and now - final_at > limits.grace_s:
        return f"hung {limits.grace_s:g} s after its final result"
    if now - last > limits.idle_s:
        return f"idle: no event for {limits.idle_s:g} s"
    return None


def _read_lines(stream: object, lines: queue.Queue[bytes | None]) -> None:
    readline = stream.readline  # type: ignore[attr-defined]
    try:
        while line := readline(1 << 20):
            lines.put(line)
    finally:
        lines.put(None)
        with contextlib.suppress(OSError):
            stream.close()  # type: ignore[attr-defined]
