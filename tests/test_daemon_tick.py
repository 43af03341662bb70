"""One look of the daemon's loop (`Daemon._tick`) in this process, at a moment the
test chooses: outside the working windows it takes the inbox but runs nothing,
inside them it works. What a signal handler or another thread says reaches the
loop through `Daemon.flags`. A real project, state and lock; the scripted model
with an empty script (an iteration that asks it for anything HALTs at once)."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from soda.cli.demo import SCRIPT_PATH, prepare
from soda.contracts import HumanInput
from soda.contracts.outcomes import RunStatus
from soda.daemon.process import Daemon
from soda.human.write import write_input
from soda.loop.host import Run
from soda.loop.session import Session
from soda.system.lock import release_lock

NIGHT = datetime(2026, 5, 4, 3, 0)
NOON = datetime(2026, 5, 4, 12, 0)


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[Daemon, Session]]:
    """A daemon that may work from 03:00 to 03:59 only, after its preflight."""
    config_path = prepare(tmp_path / "project")
    text = config_path.read_text()
    assert text.count("windows = []") == 1
    config_path.write_text(text.replace("windows = []", 'windows = ["* 3 * * *"]'))
    (config_path.parent / SCRIPT_PATH).write_text(json.dumps({"responses": []}))
    daemon = Daemon(config_path)
    run = daemon._preflight()
    session = run._session  # the loop's own: the test reads its record
    try:
        yield daemon, session
    finally:
        session.finish_run(RunStatus.STOPPED, "test over")
        release_lock(daemon.config.state_dir)
        session.db.conn.close()


def loop_of(daemon: Daemon) -> Run:
    assert daemon.loop is not None  # its preflight opened it
    return daemon.loop


def count(session: Session, table: str) -> int:
    [(n,)] = session.db.execute(f"SELECT count(*) FROM {table}").fetchall()
    return int(n)


def test_a_tick_outside_the_working_windows_runs_nothing(
    daemon: tuple[Daemon, Session],
) -> None:
    soda, session = daemon
    write_input(session.config.state_dir, HumanInput(kind="correction", text="smaller steps"))

    soda._tick(loop_of(soda), now=NOON)

    assert [item.kind for item in session.human.pending()] == ["correction"]  # taken in
    assert count(session, "runs") == 0 and count(session, "iterations") == 0
    assert count(session, "agent_calls") == 0
    assert session.run_ended and not soda.idle
    assert soda._next_wake(NOON) == (
        f"at {NOON.replace(hour=3, day=5).astimezone().isoformat(timespec='minutes')}"
        " (daemon.windows)"
    )

    soda._tick(loop_of(soda), now=NIGHT)  # inside the window the same daemon works

    assert count(session, "runs") == 1 and count(session, "iterations") == 1
    assert soda.idle  # the empty script HALTed it: idle until a person writes


def test_signal_handlers_only_set_flags_and_the_loop_acts_on_them(
    daemon: tuple[Daemon, Session],
) -> None:
    soda, session = daemon
    config_path = soda.config_path
    config_path.write_text(
        config_path.read_text().replace("tick_seconds = 5.0", "tick_seconds = 7.0")
    )
    before = soda.config

    soda._reload_soon(signal.SIGHUP, None)

    assert soda.flags.reload.is_set() and soda.wake.is_set()
    assert soda.config is before  # nothing reloaded in the handler
    soda._tick(loop_of(soda), now=NOON)
    assert not soda.flags.reload.is_set()
    assert soda.config is not before and soda.config.daemon.tick_seconds == 7.0

    assert not session.stop_requested
    soda._stop_soon()

    assert soda.stopping.is_set() and soda.wake.is_set()
    assert session.stop_requested  # one flag: the session stops at its next safe point
    soda._tick(loop_of(soda), now=NIGHT)  # stopping: not even inside the window
    assert count(session, "runs") == 0
