"""The daemon as a person uses it: real processes started with `soda start`, real
signals, real files in the inbox, the scripted model. Every wait is a condition
with a deadline, never a fixed sleep (an idle daemon's free wakes: test_wakes)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from soda.cli.demo import SCRIPT_PATH, prepare
from tests.conftest import git, soda, wait_for

ROOT = Path(__file__).resolve().parent.parent
DEMO = json.loads((ROOT / "soda" / "demo" / "script.json").read_text())["responses"]


def query(root: Path, sql: str, *params: Any) -> list[tuple]:
    db = sqlite3.connect(root / "state" / "soda.db", timeout=10)
    try:
        return db.execute(sql, params).fetchall()
    finally:
        db.close()


def pid_of(root: Path) -> int:
    return int((root / "state" / "soda.pid").read_text())


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie child of ours is dead for this purpose
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        return True


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Callable[[list[dict[str, Any]]], Path]]:
    started: list[Path] = []

    def make(responses: list[dict[str, Any]]) -> Path:
        root = tmp_path / "project"
        prepare(root)
        text = json.dumps({"responses": responses}).replace(
            "{python}", json.dumps(sys.executable)[1:-1]
        )
        (root / SCRIPT_PATH).write_text(text)
        started.append(root)
        return root

    yield make
    for root in started:  # end only the daemons this test started, by their pid
        pid_file = root / "state" / "soda.pid"
        if pid_file.exists():
            pid = int(pid_file.read_text())
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_start_status_tell_reject_stop(project) -> None:
    root = project(DEMO)
    started = soda("start", cwd=root)
    assert started.returncode == 0, started.stderr
    pid = pid_of(root)
    assert f"pid {pid}" in started.stdout
    assert f"running (pid {pid})" in soda("status", cwd=root).stdout

    second = soda("start", cwd=root)
    assert second.returncode == 2
    assert f"already running here (pid {pid})" in second.stderr

    wait_for(lambda: query(root, "SELECT 1 FROM iterations WHERE decision = 'DONE'"), 60, "DONE")
    # Idle after DONE, the daemon says when it will look for work again.
    wait_for(lambda: "next wake: " in soda("status", cwd=root).stdout, 30, "next wake in status")
    soda("tell", "prefer small functions", cwd=root)
    told = time.monotonic()
    wait_for(
        lambda: query(
            root, "SELECT 1 FROM human_inputs WHERE payload_json LIKE '%small functions%'"
        ),
        2,
        "the told input in human_inputs",
    )
    assert time.monotonic() - told < 2

    (root / "state" / "inbox" / "broken.json").write_text("{not json")
    rejected = root / "state" / "inbox" / "rejected"
    wait_for(lambda: (rejected / "broken.json.reason").exists(), 10, "the rejection")
    assert "broken.json" in (rejected / "broken.json.reason").read_text()
    assert (rejected / "broken.json").read_text() == "{not json"  # kept, never deleted

    stopping = time.monotonic()
    stopped = soda("stop", cwd=root, timeout=30)
    assert stopped.returncode == 0, stopped.stderr
    assert time.monotonic() - stopping < 10
    assert not alive(pid)
    assert "soda: stopped" in soda("status", cwd=root).stdout


def test_sigkill_in_act_then_restart_recovers(project) -> None:
    slow = [dict(entry) for entry in DEMO]
    # The executor's first command now takes long enough to be killed mid-ACT.
    slow[5] = {
        "agent": "executor",
        "tool_calls": [
            {"name": "run_command", "input": {"command": "sleep 30", "timeout_seconds": 60}}
        ],
    }
    root = project(slow)
    base = git(root, "rev-parse", "main")
    assert soda("start", cwd=root).returncode == 0
    pid = pid_of(root)
    wait_for(lambda: query(root, "SELECT 1 FROM iterations WHERE phase = 'act'"), 60, "ACT")
    soda("tell", "keep it simple", cwd=root)
    wait_for(
        lambda: query(root, "SELECT 1 FROM events WHERE kind = 'act.workspace'"), 20, "the task"
    )
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not alive(pid), 10, "the kill")
    worktrees = root / "state" / "worktrees"
    used = query(root, "SELECT data_json FROM events WHERE kind = 'act.workspace'")[0][0]
    # The executor's worktree (one of the pool's, whichever was free), left behind.
    left = Path(json.loads(used)["path"])
    assert left.parent == worktrees and (left / ".git").is_file()

    # Restart with a script that finds the spec unmet but has nothing to do.
    stuck = [
        {
            "agent": "verifier",
            "tool_calls": [
                {
                    "name": "submit",
                    "input": {
                        "checks": [],
                        "task_updates": [],
                        "learnings": [],
                        "summary": "s",
                        "learning_verdicts": [],
                    },
                }
            ],
        },
        {
            "agent": "assessor",
            "tool_calls": [
                {
                    "name": "submit",
                    "input": {
                        "spec_satisfied": False,
                        "confidence": "low",
                        "gaps": [],
                        "summary": "s",
                    },
                }
            ],
        },
        {
            "agent": "planner",
            "tool_calls": [
                {
                    "name": "submit",
                    "input": {
                        "actionable_work_exists": False,
                        "new_tasks": [],
                        "iteration_plan": None,
                        "stuck_reason": "waiting",
                        "learnings": [],
                    },
                }
            ],
        },
    ]
    (root / SCRIPT_PATH).write_text(json.dumps({"responses": stuck}))
    assert soda("start", cwd=root).returncode == 0
    wait_for(
        lambda: query(root, "SELECT 1 FROM iterations WHERE number = 2 AND ended_at IS NOT NULL"),
        30,
        "iteration 2",
    )
    first = query(root, "SELECT outcome, error FROM iterations WHERE number = 1")[0]
    assert first == ("aborted", "aborted in phase act")
    assert not list(worktrees.glob("work*"))
    assert git(root, "for-each-ref", "refs/heads/soda-work/") == ""  # its branch is gone
    assert git(root, "rev-parse", "soda/spec") == base  # never moved to an ungated commit
    told = query(root, "SELECT status FROM human_inputs WHERE payload_json LIKE '%keep it simple%'")
    assert told and told[0][0] in ("pending", "claimed", "applied")
    assert [r[0] for r in query(root, "SELECT number FROM iterations ORDER BY number")] == [1, 2]
    assert soda("stop", cwd=root, timeout=30).returncode == 0


def test_sigterm_stops_at_a_safe_point_and_exits_0(project) -> None:
    root = project(DEMO)
    daemon = subprocess.Popen(
        [sys.executable, "-m", "soda", "daemon-run"],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: (root / "state" / "soda.pid").exists(), 20, "the pid file")
        wait_for(lambda: query(root, "SELECT 1 FROM iterations"), 30, "an iteration")
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=30) == 0
    finally:
        if daemon.poll() is None:
            daemon.kill()
    assert not (root / "state" / "soda.pid").exists()
    assert not any((root / "state" / "worktrees").iterdir())
    assert query(root, "SELECT count(*) FROM iterations WHERE ended_at IS NULL")[0][0] == 0


def test_sighup_reloads_the_config_and_keeps_it_when_bad(project) -> None:
    root = project(DEMO)
    daemon = subprocess.Popen(
        [sys.executable, "-m", "soda", "daemon-run"],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(
            lambda: query(root, "SELECT 1 FROM iterations WHERE decision = 'DONE'"), 60, "DONE"
        )
        config = root / "soda.toml"
        config.write_text(config.read_text().replace("tick_seconds = 5.0", "tick_seconds = 2.0"))
        daemon.send_signal(signal.SIGHUP)
        wait_for(
            lambda: query(root, "SELECT 1 FROM events WHERE kind = 'config.reloaded'"), 10, "reload"
        )
        config.write_text(config.read_text() + "\n[nonsense]\n")
        daemon.send_signal(signal.SIGHUP)
        failed = wait_for(
            lambda: query(root, "SELECT data_json FROM events WHERE kind = 'config.reload_failed'"),
            10,
            "the refused reload",
        )
        assert "unknown key nonsense" in failed[0][0]
        assert daemon.poll() is None  # a bad file does not take the daemon down
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=30) == 0
    finally:
        if daemon.poll() is None:
            daemon.kill()
