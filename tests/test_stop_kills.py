"""The first `soda stop` or Ctrl-C kills what soda is running: a ten-minute test
run or an agent's command ends within seconds, its result is thrown away (a
killed test run is never cached, never judged as failing tests), and the
iteration is recorded `interrupted`. A notification is the one command a first
stop lets finish (tests/test_lifecycle.py: the second signal ends it).

Real daemons and `soda run` processes on the demo project, real jailed commands
(`sleep 600.<nonce>`: the nonce finds the very process), the scripted model; and
a stop in the milliseconds a jail takes to start leaves nothing running."""

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
from pathlib import Path
from typing import Any

import pytest

from soda.cli.demo import prepare
from soda.config import load
from soda.errors import Interrupted
from soda.llm.function import FunctionModel
from soda.loop.run import run_loop
from soda.loop.session import Session
from soda.system import proc
from soda.system.jail import Jail
from soda.system.lifecycle import stop_signals
from tests import test_lifecycle
from tests.conftest import soda, wait_for
from tests.hostile_helpers import describe
from tests.test_daemon import DEMO, alive, pid_of, query
from tests.test_lifecycle import DEMO_TESTS, processes_with

project = test_lifecycle.project
"""The demo project with its script and soda.toml changed; the daemons a test
started are killed by pid at its end."""


def dead(pid: int) -> bool:
    """Gone, or a zombie waiting for its reaper: it runs nothing any more."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def long_sleep() -> tuple[str, str]:
    """A ten-minute `sleep` and the argument that finds its process."""
    seconds = f"600.{uuid.uuid4().int % 10**9:09d}"
    return f"sleep {seconds}", seconds


def sleeper(seconds: str) -> int | None:
    """The pid of the `sleep` process itself (not the jail or shell around it)."""
    for pid in processes_with(seconds):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes() == f"sleep\0{seconds}\0".encode():
                return pid
        except OSError:
            continue
    return None


def test_soda_stop_kills_a_long_test_run_at_once(project) -> None:
    command, nonce = long_sleep()
    root = project(DEMO, **{DEMO_TESTS: f"test_command = {json.dumps(command)}"})
    assert soda("start", cwd=root).returncode == 0
    daemon = pid_of(root)
    sleep = wait_for(lambda: sleeper(nonce), 60, "the test run (the baseline)")
    started = time.monotonic()
    stopped = soda("stop", cwd=root, timeout=60)
    took = time.monotonic() - started
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.splitlines()[-1] == f"soda (pid {daemon}) stopped"  # not "at once"
    assert took < 10, f"soda stop took {took:.1f} s"
    assert dead(sleep) and not alive(daemon)
    row = query(root, "SELECT outcome, error, ended_at FROM iterations WHERE number = 1")[0]
    assert row[:2] == ("interrupted", f"stopped by a signal: `{command}` was killed"), row
    assert row[2]
    assert query(root, "SELECT status FROM runs") == [("interrupted",)]
    # The killed run is no evidence: not cached, not judged as failing tests.
    assert query(root, "SELECT count(*) FROM test_results") == [(0,)]
    assert query(root, "SELECT count(*) FROM events WHERE kind = 'act.baseline'") == [(0,)]


def test_a_first_ctrl_c_on_soda_run_kills_the_executors_command(project) -> None:
    command, nonce = long_sleep()
    script = [dict(entry) for entry in DEMO]
    script[5] = {  # the executor's first command: ten minutes
        "agent": "executor",
        "tool_calls": [
            {"name": "run_command", "input": {"command": command, "timeout_seconds": None}}
        ],
    }
    root = project(script)
    run = subprocess.Popen(
        [sys.executable, "-m", "soda", "run"],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        sleep = wait_for(lambda: sleeper(nonce), 60, "the executor's command")
        started = time.monotonic()
        run.send_signal(signal.SIGINT)  # one Ctrl-C
        output, _ = run.communicate(timeout=60)
        took = time.monotonic() - started
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, output
    assert took < 10, f"soda run took {took:.1f} s to stop"
    assert "INTERRUPTED: stopped in iteration 1" in output.splitlines()[-1]
    assert dead(sleep)
    row = query(root, "SELECT outcome, ended_at FROM iterations WHERE number = 1")[0]
    assert row[0] == "interrupted" and row[1]
    assert query(root, "SELECT status FROM runs") == [("interrupted",)]
    assert not any((root / "state" / "worktrees").iterdir())


# --- the registry: what a first stop does to the commands soda runs -----------------


def test_a_stop_kills_interruptible_commands_and_spares_the_others(tmp_path: Path) -> None:
    killed: list[BaseException] = []
    spared: list[proc.CommandResult] = []

    def interruptible() -> None:
        try:
            proc.run("sleep 30", cwd=tmp_path, timeout=60)
        except Interrupted as exc:
            killed.append(exc)

    def lasting() -> None:
        spared.append(proc.run("sleep 0.5; echo done", tmp_path, 60, interruptible=False))

    threads = [threading.Thread(target=interruptible), threading.Thread(target=lasting)]
    try:
        for thread in threads:
            thread.start()
        wait_for(lambda: len(proc.live_commands()) == 2, 10, "both commands")
        started = time.monotonic()
        assert proc.interrupt_live() == 1
        threads[0].join(timeout=10)
        assert time.monotonic() - started < 5 and not threads[0].is_alive()
        assert [str(e) for e in killed] == ["stopped by a signal: `sleep 30` was killed"]
        with pytest.raises(Interrupted, match="soda is stopping: `true` was not started"):
            proc.run("true", cwd=tmp_path, timeout=10)
        threads[1].join(timeout=10)
        assert spared[0].ok and spared[0].output.strip() == "done"
    finally:
        proc.allow_commands()
        proc.kill_live()
        for thread in threads:
            thread.join(timeout=10)
    assert proc.run("true", cwd=tmp_path, timeout=10).ok  # after the stop: runs again
    assert proc.live_commands() == []


def test_a_stop_as_a_jailed_command_starts_leaves_nothing_running(tmp_path: Path) -> None:
    """The jail's inner bwrap has a process group of its own and dies with its
    parent only once its setup asked for that: a stop in that window (right after
    bwrap started) must still end it and the command it would go on to run.
    Without the tree kill about one start in ten here left an orphaned jail."""
    prepare(tmp_path / "project")
    jail = Jail.for_config(load(tmp_path / "project" / "soda.toml"))
    for attempt in range(40):
        command, nonce = long_sleep()
        errors: list[BaseException] = []

        def jailed(command: str = command, errors: list[BaseException] = errors) -> None:
            try:
                jail.run(command, tmp_path / "project", timeout=60)
            except BaseException as exc:
                errors.append(exc)

        worker = threading.Thread(target=jailed)
        worker.start()
        try:
            deadline = time.monotonic() + 10
            while not processes_with(nonce):  # no sleep: the window is milliseconds
                assert time.monotonic() < deadline, "the jail did not start"
            proc.interrupt_live()
            worker.join(timeout=10)
            assert not worker.is_alive()
            assert [type(e) for e in errors] == [Interrupted], attempt
            # An orphaned inner bwrap (its argv names the command) would stay.
            deadline = time.monotonic() + 10
            while left := processes_with(nonce):
                assert time.monotonic() < deadline, f"the jail outlived the stop: {describe(left)}"
                time.sleep(0.02)
        finally:
            proc.allow_commands()
            proc.kill_live()
            worker.join(timeout=10)
            for pid in processes_with(nonce):  # only after a failure: leave nothing behind
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def test_a_second_signal_during_a_model_call_stops_at_once(tmp_path: Path) -> None:
    """Nothing kills a model call: the first signal waits for it (the next safe
    point), the second stops at once, as before, and the records say so."""
    root = tmp_path / "project"
    prepare(root)

    def answer(request: Any) -> Any:
        os.kill(os.getpid(), signal.SIGINT)  # the first: stop at the next safe point
        os.kill(os.getpid(), signal.SIGINT)  # the second, before that: at once
        raise AssertionError("a second signal raises KeyboardInterrupt before this")

    session = Session.open(load(root / "soda.toml"), model=FunctionModel(answer))
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with pytest.raises(KeyboardInterrupt), stop_signals(lambda: None):
            run_loop(session, lambda line: None)
    finally:  # this process goes on: its own handlers back, commands allowed
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        proc.allow_commands()
    row = session.db.execute("SELECT outcome, error, ended_at FROM iterations").fetchone()
    assert row[:2] == ("interrupted", "stopped at once by a second signal") and row[2]
    assert session.db.execute("SELECT status FROM runs").fetchone() == ("interrupted",)
