"""`[budget] max_wall_seconds`: a run that passes it is stopped as `soda stop` stops
one (the running command killed), but ends STUCK naming the key, in its iteration
and run records; a daemon stays up and idles, and its next run starts commands again."""

from __future__ import annotations

import json
import sys
import uuid
from datetime import datetime
from pathlib import Path

from soda.config import load
from soda.contracts import HumanInput
from soda.contracts.outcomes import RunStatus
from soda.daemon.process import Daemon
from soda.human.write import write_input
from soda.loop.run import Ending, run_loop
from soda.loop.session import Session
from soda.system import proc
from soda.system.lock import release_lock
from tests.conftest import wait_for
from tests.sample import sample_project
from tests.test_daemon import DEMO, query
from tests.test_lifecycle import processes_with, soda_run

PYTHON = json.dumps(sys.executable)[1:-1]
LIMIT = 15
"""Seconds: enough for a loaded machine to reach the executor's command."""


def project(tmp_path: Path, responses: list[dict[str, object]], limit: float) -> Path:
    return sample_project(
        tmp_path,
        responses=responses,
        settings={"max_wall_seconds = 14400.0": f"max_wall_seconds = {limit}"},
    )


def sleeping_executor(marker: str) -> list[dict[str, object]]:
    """The demo, its executor's first command one that sleeps ten minutes."""
    slow = [dict(entry) for entry in DEMO]
    command = f"{sys.executable} -c 'import time; time.sleep(600)' {marker}"
    slow[5] = {
        "agent": "executor",
        "tool_calls": [
            {"name": "run_command", "input": {"command": command, "timeout_seconds": 900}}
        ],
    }
    return slow


def test_a_run_out_of_time_kills_the_command_and_ends_stuck_naming_the_key(
    tmp_path: Path,
) -> None:
    marker = f"soda-wall-{uuid.uuid4().hex}"
    root = project(tmp_path, sleeping_executor(marker), LIMIT)
    run = soda_run(root)
    try:
        wait_for(lambda: processes_with(marker), 60, "the executor's sleeping command")
        output, _ = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 3, output
    assert not processes_with(marker)
    last = output.splitlines()[-1]
    assert last.startswith("STUCK: soda needs a person"), output
    assert f"budget.max_wall_seconds = {LIMIT} s" in output
    rows = query(root, "SELECT decision, decision_reason, outcome, ended_at FROM iterations")
    assert len(rows) == 1
    decision, reason, outcome, ended = rows[0]
    assert (decision, outcome) == ("STUCK", "budget") and ended
    assert "budget.max_wall_seconds" in reason and "interrupted" not in reason
    status, run_reason, began, closed = query(
        root, "SELECT status, final_reason, started_at, ended_at FROM runs"
    )[0]
    assert status == "stuck" and "budget.max_wall_seconds" in run_reason
    # The limit plus one safe point: the killed command's tool call returns at once.
    took = (datetime.fromisoformat(closed) - datetime.fromisoformat(began)).total_seconds()
    assert LIMIT <= took < LIMIT + 8, took
    assert not any((root / "state" / "worktrees").iterdir())


def test_a_limit_passed_before_an_iteration_ends_it_stuck_and_the_next_run_runs_commands(
    tmp_path: Path,
) -> None:
    """In-process, as the daemon holds its session: the limit passes before the
    iteration's first safe point; the run ends STUCK, and the next run (the
    daemon's next wake) may run commands again, its limit started afresh."""
    root = project(tmp_path, DEMO, 0.2)
    session = Session.open(load(root / "soda.toml"), start_run=False)
    try:
        session.start_run()
        wait_for(session.wall.passed.is_set, 10, "the wall limit")
        result = run_loop(session, lambda line: None)
        assert result.ending is Ending.STUCK
        assert "budget.max_wall_seconds = 0.2 s" in result.reason
        assert query(root, "SELECT status FROM runs") == [("stuck",)]
        assert query(root, "SELECT outcome FROM iterations") == [("budget",)]
        assert proc.run("true", cwd=root, timeout=10).ok
        text = (root / "soda.toml").read_text().replace("max_wall_seconds = 0.2", "")
        (root / "soda.toml").write_text(text)
        session.live.current = load(root / "soda.toml")
        session.start_run()
        assert not session.stop_requested
    finally:
        session.finish_run(RunStatus.STOPPED, "test over")
        proc.allow_commands()


def test_a_daemon_wake_out_of_time_ends_stuck_and_the_daemon_stays_up(tmp_path: Path) -> None:
    """Per wake: the daemon's run ends STUCK on the limit, the daemon idles (not
    stopped), and a person's word starts a new run whose limit starts afresh."""
    root = project(tmp_path, DEMO, 0.3)
    daemon = Daemon(root / "soda.toml")
    run = daemon._preflight()
    session = run._session  # the loop's own: the test reads its record
    try:
        daemon._tick(run)
        assert session.run_ended and daemon.idle and not daemon.stopping.is_set()
        ((status, reason),) = query(root, "SELECT status, final_reason FROM runs")
        assert status == "stuck" and "budget.max_wall_seconds = 0.3 s" in reason
        assert proc.run("true", cwd=root, timeout=10).ok  # commands may start again
        text = (root / "soda.toml").read_text().replace("max_wall_seconds = 0.3", "")
        (root / "soda.toml").write_text(text)
        daemon.live.current = load(root / "soda.toml")
        write_input(session.config.state_dir, HumanInput(kind="correction", text="go on"))
        daemon._tick(run)
        runs = query(root, "SELECT status, final_reason FROM runs ORDER BY id")
        assert len(runs) == 2 and "max_wall_seconds" not in str(runs[1][1])
    finally:
        session.finish_run(RunStatus.STOPPED, "test over")
        release_lock(daemon.config.state_dir)
        session.db.conn.close()
        proc.allow_commands()
