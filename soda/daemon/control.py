"""Controlling the daemon from outside: `soda start` waits for its readiness,
`soda stop` sends the first SIGTERM (the daemon kills the commands it runs and
stops at its next safe point, within seconds), says what it still waits for and,
after its timeout, stops it at once and then kills whatever of its process tree
is left (soda.daemon.process is the process)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sqlite_utils import Database

from soda.config import Config
from soda.daemon.parts import LOG_NAME, kill_tree, rotate_log
from soda.errors import SodaError, UserError
from soda.store import runs
from soda.system.clock import SYSTEM_CLOCK, Clock
from soda.system.lifecycle import clear_start_files, describe_wait, read_activity, read_start
from soda.system.lock import pid_alive, running_pid


def start(config: Config, wait_seconds: float = 60.0, clock: Clock = SYSTEM_CLOCK) -> int:
    """Launch the daemon detached and return its pid once it is ready: it holds the
    lock, has recovered and passed its preflight (config, provider key, jail).
    UserError with the daemon's own one-line reason when it refused to start."""
    state = config.state_dir
    holder = running_pid(state)
    if holder:
        raise UserError(f"soda is already running here (pid {holder}); `soda stop` ends it")
    log_path = state / "logs" / LOG_NAME
    rotate_log(log_path)
    clear_start_files(state)
    with log_path.open("ab") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", "soda", "-C", str(config.root), "daemon-run"],
            cwd=config.root,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = clock.monotonic() + wait_seconds
    while clock.monotonic() < deadline:
        word = read_start(state)
        if word is not None and word[0] == "error":
            child.wait(10)
            raise UserError(f"the daemon did not start: {word[1]}")
        if word == ("ready", str(child.pid)):
            return child.pid
        if child.poll() is not None:
            break
        clock.sleep(0.05)
    if child.poll() is None:
        child.kill()
        child.wait()
        raise SodaError(f"the daemon was not ready within {wait_seconds:g} s; see {log_path}")
    lines = log_path.read_text(errors="replace").strip().splitlines() if log_path.exists() else []
    last = lines[-1] if lines else "(nothing in the log)"
    raise SodaError(f"the daemon exited (code {child.returncode}) before it was ready: {last}")


@dataclass(frozen=True)
class Stopped:
    pid: int
    at_once: bool
    """The safe point did not come within the timeout: it was stopped at once."""


def stop(
    config: Config,
    db: Database,
    timeout: float = 30.0,
    say: Callable[[str], None] = print,
    clock: Clock = SYSTEM_CLOCK,
) -> Stopped | None:
    """SIGTERM the soda holding the lock (it kills the commands it runs, their
    results thrown away) and wait for its safe point, saying what it waits for;
    after `timeout` stop it at once (a second SIGTERM: it kills everything it
    started, a notification too, and closes its records), then SIGKILL whatever
    of its tree is left. None if no soda ran here."""
    state = config.state_dir
    pid = running_pid(state)
    if pid is None:
        return None
    os.kill(pid, signal.SIGTERM)
    deadline = clock.monotonic() + timeout
    next_word = clock.monotonic() + 0.5  # a quick stop says nothing
    while clock.monotonic() < deadline:
        if _gone(state, pid):
            return Stopped(pid, at_once=False)
        if clock.monotonic() >= next_word:
            say(f"waiting for {_waiting_for(config, db, state)}")
            next_word = clock.monotonic() + 10
        clock.sleep(0.05)
    say(f"not stopped after {timeout:g} s: stopping at once")
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if not _wait_gone(state, pid, KILL_GRACE_SECONDS, clock):
        kill_tree(pid, state)
        if not _wait_gone(state, pid, KILL_GRACE_SECONDS, clock):
            raise SodaError(f"soda (pid {pid}) survived SIGKILL")
    return Stopped(pid, at_once=True)


KILL_GRACE_SECONDS = 10.0
"""After the second SIGTERM, how long the daemon gets to close its records."""


def _waiting_for(config: Config, db: Database, state: Path) -> str:
    _, commands = read_activity(state)
    current = runs.unfinished_iteration(db)
    return describe_wait(commands, config.project.test_command, current[1] if current else None)


def _gone(state: Path, pid: int) -> bool:
    _reap(pid)
    return running_pid(state) is None and not pid_alive(pid)


def _wait_gone(state: Path, pid: int, seconds: float, clock: Clock) -> bool:
    deadline = clock.monotonic() + seconds
    while clock.monotonic() < deadline:
        if _gone(state, pid):
            return True
        clock.sleep(0.05)
    return _gone(state, pid)


def _reap(pid: int) -> None:
    """Collect the daemon if we are its parent (tests start it from this process)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
