"""The per-repository instance lock: one soda (daemon or foreground run) at a time.

An exclusive flock on `state/soda.lock`, held for the process's life, decides;
`state/soda.pid` only names the holder for messages. A pid file whose lock nobody
holds is from a crashed process and is cleared.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

from soda.errors import UserError

LOCK_NAME = "soda.lock"
PID_NAME = "soda.pid"

_held: dict[Path, IO[str]] = {}
"""Locks this process holds, so one process can open several sessions in turn."""


def acquire_lock(state_dir: Path) -> None:
    """Take the per-repository lock and record our pid; UserError naming the holder."""
    path = (state_dir / LOCK_NAME).resolve()
    if path in _held:
        return
    state_dir.mkdir(parents=True, exist_ok=True)
    handle = path.open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        holder = read_pid(state_dir)
        raise UserError(
            f"soda is already running here (pid {holder or 'unknown'}); `soda stop` ends it"
        ) from None
    _held[path] = handle
    (state_dir / PID_NAME).write_text(f"{os.getpid()}\n")


def release_lock(state_dir: Path) -> None:
    path = (state_dir / LOCK_NAME).resolve()
    handle = _held.pop(path, None)
    if handle is None:
        return
    pid_file = state_dir / PID_NAME
    if read_pid(state_dir) == os.getpid():
        pid_file.unlink(missing_ok=True)
    handle.close()


def read_pid(state_dir: Path) -> int | None:
    try:
        return int((state_dir / PID_NAME).read_text().strip())
    except (OSError, ValueError):
        return None


def running_pid(state_dir: Path) -> int | None:
    """The pid of the live soda holding the lock, or None (clearing a stale pid file)."""
    path = state_dir / LOCK_NAME
    if not path.exists():
        return None
    if path.resolve() in _held:
        return os.getpid()
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return read_pid(state_dir)
        fcntl.flock(handle, fcntl.LOCK_UN)
    # Nobody holds the lock: a pid file left behind is from a crashed process.
    (state_dir / PID_NAME).unlink(missing_ok=True)
    return None


def pid_alive(pid: int | None) -> bool:
    """A process with this pid exists (one of another user's counts)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
