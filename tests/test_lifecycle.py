"""An honest start and stop: `soda start` returns only once the daemon is ready
(or says why not), `soda stop` says what it waits for and leaves nothing soda
started running, SIGTERM/SIGINT on a foreground `soda run` do what they do for
the daemon, and every record is closed as what happened (interrupted, crashed)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from soda.cli.demo import SCRIPT_PATH, prepare
from soda.config import load
from soda.llm.function import FunctionModel
from soda.loop.run import run_loop
from soda.loop.session import Session
from soda.store import open_db
from soda.store.db import now
from soda.system import proc
from soda.system.lifecycle import ActivityFile, kill_leftovers, read_activity
from soda.system.proc import LiveCommand
from tests.conftest import soda, wait_for
from tests.test_daemon import DEMO, alive, pid_of, query

PYTHON = json.dumps(sys.executable)[1:-1]


def processes_with(marker: str) -> list[int]:
    """Live processes whose command line holds `marker` (zombies do not count)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker.encode() in cmdline and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    started: list[Path] = []

    def make(responses: list[dict[str, Any]], **toml: str) -> Path:
        root = tmp_path / "project"
        prepare(root)
        text = json.dumps({"responses": responses}).replace("{python}", PYTHON)
        (root / SCRIPT_PATH).write_text(text)
        config = (root / "soda.toml").read_text()
        for old, new in toml.items():
            assert old in config, old
            config = config.replace(old, new)
        (root / "soda.toml").write_text(config)
        started.append(root)
        return root

    yield make
    for root in started:  # end only the daemons this test started, by their pid
        pid_file = root / "state" / "soda.pid"
        if pid_file.exists() and alive(int(pid_file.read_text())):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


DEMO_TESTS = f'test_command = "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {sys.executable} -m pytest -q"'


def slow_tests(marker: str) -> dict[str, str]:
    """soda.toml's test command made one that runs for two minutes, findable by `marker`."""
    command = f"{sys.executable} -c 'import time; time.sleep(120)' {marker}"
    return {DEMO_TESTS: f"test_command = {json.dumps(command)}"}


def test_start_refuses_with_the_daemons_reason_in_one_line(project) -> None:
    root = project(
        DEMO,
        **{
            'provider = "scripted"': 'provider = "anthropic"',
            'api_key_env = "ANTHROPIC_API_KEY"': 'api_key_env = "SODA_TEST_NO_SUCH_KEY"',
        },
    )
    started = soda("start", cwd=root)
    assert started.returncode == 2
    assert started.stderr.splitlines() == [
        "soda: the daemon did not start: no Anthropic API key: set the environment variable"
        " SODA_TEST_NO_SUCH_KEY (or name another one in [model] api_key_env)"
    ]
    assert not (root / "state" / "soda.pid").exists()
    assert "running" not in soda("status", cwd=root).stdout.splitlines()[0]
    assert query(root, "SELECT count(*) FROM runs")[0][0] == 0


def test_start_returns_after_recovery(project) -> None:
    root = project(DEMO)
    dead = subprocess.Popen(["true"])
    dead.wait()
    db = open_db(root / "state" / "soda.db")
    with db.conn:
        run_id = (
            db["runs"]
            .insert(
                {
                    "started_at": now(),
                    "status": "running",
                    "pid": dead.pid,
                    "spec_path": "s",
                    "milestone": "spec",
                    "milestone_branch": "soda/spec",
                    "base_branch": "main",
                }
            )
            .last_pk
        )
        db["iterations"].insert(
            {"run_id": run_id, "number": 1, "started_at": now(), "phase": "act"}
        )
    db.conn.close()
    started = soda("start", cwd=root)
    assert started.returncode == 0, started.stderr
    pid = pid_of(root)
    assert (root / "state" / "daemon.ready").read_text().strip() == str(pid)
    # Recovery ran before `start` returned: the dead run and its iteration are closed.
    assert query(root, "SELECT status FROM runs WHERE id = ?", run_id) == [("aborted",)]
    assert query(root, "SELECT outcome FROM iterations WHERE number = 1") == [("aborted",)]
    assert soda("stop", cwd=root, timeout=60).returncode == 0
    assert not alive(pid)


def test_stop_says_what_it_waits_for_then_stops_at_once(project) -> None:
    # A first stop kills the test runs and agents' commands at once
    # (tests/test_stop_kills.py); a notification is the one command it lets finish,
    # so a slow one shows the wait and the stop at once.
    marker = f"soda-notify-{uuid.uuid4().hex}"
    notify = f"{sys.executable} -c 'import time; time.sleep(120)' {marker}"
    root = project(
        DEMO, **{"# notify_command = (not set)": f"notify_command = {json.dumps(notify)}"}
    )
    assert soda("start", cwd=root).returncode == 0
    pid = pid_of(root)
    wait_for(lambda: processes_with(marker), 120, "the notification of DONE")
    stopped = soda("stop", "--timeout", "1.5", cwd=root, timeout=60)
    assert stopped.returncode == 0, stopped.stderr
    lines = stopped.stdout.splitlines()
    assert lines[0].startswith(f"waiting for `{notify}`, "), lines
    assert lines[-1] == f"soda (pid {pid}) stopped at once; what it ran was killed"
    assert not alive(pid)
    wait_for(lambda: not processes_with(marker), 5, "the notification's end")
    assert query(root, "SELECT status FROM runs") == [("done",)]


def soda_run(root: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "soda", "run"],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_sigterm_on_soda_run_stops_at_the_next_safe_point(project) -> None:
    slow = [dict(entry) for entry in DEMO]
    slow[5] = {  # the executor's first command takes a moment: the signal lands in it
        "agent": "executor",
        "tool_calls": [
            {"name": "run_command", "input": {"command": "sleep 2", "timeout_seconds": 60}}
        ],
    }
    root = project(slow)
    run = soda_run(root)
    try:
        wait_for(
            lambda: any(c.command == "sleep 2" for c in read_activity(root / "state")[1]),
            60,
            "the executor's command",
        )
        run.send_signal(signal.SIGTERM)
        output, _ = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, output
    assert "INTERRUPTED: stopped in iteration 1" in output.splitlines()[-1]
    row = query(root, "SELECT outcome, ended_at FROM iterations WHERE number = 1")[0]
    assert row[0] == "interrupted" and row[1]
    assert query(root, "SELECT status FROM runs") == [("interrupted",)]


def test_a_second_ctrl_c_on_soda_run_kills_the_test_run_at_once(project) -> None:
    marker = f"soda-test-run-{uuid.uuid4().hex}"
    root = project(DEMO, **slow_tests(marker))
    run = soda_run(root)
    try:
        wait_for(lambda: processes_with(marker), 60, "the test run")
        # Two signals sent at once may arrive as one: repeat until it is gone.
        deadline = time.monotonic() + 30
        while run.poll() is None and time.monotonic() < deadline:
            run.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                run.wait(timeout=0.5)
        output, _ = run.communicate(timeout=30)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, output
    assert "INTERRUPTED" in output.splitlines()[-1]
    wait_for(lambda: not processes_with(marker), 5, "the test run's end")
    row = query(root, "SELECT outcome, ended_at FROM iterations WHERE number = 1")[0]
    assert row[0] == "interrupted" and row[1]
    assert query(root, "SELECT status FROM runs") == [("interrupted",)]
    assert not any((root / "state" / "worktrees").iterdir())


def test_a_crash_of_the_loop_is_recorded_as_a_crash_with_its_error(tmp_path: Path) -> None:
    root = tmp_path / "project"
    prepare(root)

    def broken(request: Any) -> Any:
        raise RuntimeError("the fake model broke")

    session = Session.open(load(root / "soda.toml"), model=FunctionModel(broken))
    with pytest.raises(RuntimeError):
        run_loop(session, lambda line: None)
    row = session.db.execute("SELECT outcome, error, ended_at FROM iterations").fetchone()
    assert row[:2] == ("crashed", "RuntimeError: the fake model broke") and row[2]
    status = session.db.execute("SELECT status, final_reason FROM runs").fetchone()
    assert status == ("crashed", "RuntimeError: the fake model broke")


def test_a_restart_kills_what_a_dead_soda_left_running_and_nothing_else(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    left = subprocess.Popen(["sleep", "60"], start_new_session=True)
    other = subprocess.Popen(["sleep", "61"], start_new_session=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    try:
        ActivityFile(state)(
            [
                LiveCommand(left.pid, "sleep 60", time.time(), proc.start_ticks(left.pid)),
                # the same group id but another process (its id was reused): spared
                LiveCommand(other.pid, "sleep 61", time.time(), 1),
            ]
        )
        data = json.loads((state / "activity.json").read_text())
        data["pid"] = dead.pid  # written by a soda that has died since
        (state / "activity.json").write_text(json.dumps(data))
        assert kill_leftovers(state, alive) == 1
        assert left.wait(timeout=10) == -signal.SIGKILL
        assert other.poll() is None
        assert not (state / "activity.json").exists()
    finally:
        for process in (left, other):
            if process.poll() is None:
                process.kill()
                process.wait()


def test_a_second_signal_kills_every_running_command_at_once(tmp_path: Path) -> None:
    results: list[proc.CommandResult] = []
    worker = threading.Thread(
        target=lambda: results.append(proc.run("sleep 30; echo late", cwd=tmp_path, timeout=60))
    )
    started = time.monotonic()
    worker.start()
    wait_for(proc.live_commands, 10, "the command to start")
    assert [c.command for c in proc.live_commands()] == ["sleep 30; echo late"]
    assert proc.kill_live() == 1
    worker.join(timeout=10)
    assert not worker.is_alive() and time.monotonic() - started < 10
    assert results[0].returncode == -signal.SIGKILL and "late" not in results[0].output
    assert proc.live_commands() == []


def test_a_crash_of_the_daemon_is_recorded_as_a_crash_not_a_stop(project) -> None:
    # A script entry the scripted model cannot read (an unknown usage key) raises a
    # plain TypeError inside the loop: a bug, not a classified failure.
    broken = {
        "agent": "verifier",
        "usage": {"bogus_tokens": 1},
        "tool_calls": [{"name": "submit", "input": {}}],
    }
    root = project([broken])
    daemon = subprocess.Popen(
        [sys.executable, "-m", "soda", "daemon-run"],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        log, _ = daemon.communicate(timeout=60)
        assert daemon.returncode == 1, log
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    run = query(root, "SELECT status, final_reason FROM runs")
    assert len(run) == 1 and run[0][0] == "crashed"
    assert run[0][1].startswith("TypeError: ") and "bogus_tokens" in run[0][1]
    row = query(root, "SELECT outcome, error, ended_at FROM iterations")[0]
    assert row[0] == "crashed" and row[1] == run[0][1] and row[2]
    kinds = [k for (k,) in query(root, "SELECT kind FROM events WHERE kind LIKE '%crash%'")]
    assert kinds == ["crash", "daemon.crashed"]
    assert not (root / "state" / "soda.pid").exists()
    assert "soda daemon crashed: TypeError" in log
