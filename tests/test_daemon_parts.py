"""The daemon's parts in-process: windows, the lock, log rotation, notifications,
and crash recovery on a real repository and database."""

from __future__ import annotations

import subprocess
from datetime import datetime
from pathlib import Path

import pytest
from git import Repo

from soda.config import Config, DaemonConfig, load
from soda.daemon import LOG_NAME, in_window, notify, parse_windows, rotate_log
from soda.demo import prepare
from soda.errors import ConfigError, UserError
from soda.events import Events
from soda.human import HumanQueue
from soda.lock import PID_NAME, acquire_lock, release_lock, running_pid
from soda.recovery import recover
from soda.store import open_db
from soda.store.db import now
from tests.conftest import git, insert_run


def test_windows_match_the_minute() -> None:
    nights = parse_windows(["* 22-23,0-6 * * *"])
    assert in_window(nights, datetime(2026, 11, 22, 23, 30).astimezone())
    assert not in_window(nights, datetime(2026, 11, 22, 12, 0).astimezone())
    assert in_window([], datetime(2026, 11, 22, 12, 0).astimezone())


def test_bad_window_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"daemon.windows\[1\]"):
        parse_windows(["* * * * *", "every night"])


def test_lock_refuses_a_second_holder_and_clears_a_stale_pid(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    script = (
        "import fcntl, os, time\n"
        f"h = open({str(state / 'soda.lock')!r}, 'a+'); fcntl.flock(h, fcntl.LOCK_EX)\n"
        f"open({str(state / PID_NAME)!r}, 'w').write(str(os.getpid()))\n"
        "print('locked', flush=True); time.sleep(30)\n"
    )
    holder = subprocess.Popen(["python3", "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        assert running_pid(state) == holder.pid
        with pytest.raises(UserError, match=f"already running here \\(pid {holder.pid}\\)"):
            acquire_lock(state)
    finally:
        holder.kill()
        holder.wait()
    # The holder died without cleaning up: its pid file is stale and gets cleared.
    assert (state / PID_NAME).exists()
    assert running_pid(state) is None
    assert not (state / PID_NAME).exists()
    acquire_lock(state)
    release_lock(state)


def test_log_rotation_keeps_three(tmp_path: Path) -> None:
    log = tmp_path / LOG_NAME
    for n in range(5):
        log.write_bytes(b"x" * (5 * 1024 * 1024 + n))
        rotate_log(log)
    assert not log.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{LOG_NAME}.{n}" for n in (1, 2, 3)]


def test_notify_command_gets_the_event(tmp_path: Path) -> None:
    db = open_db(tmp_path / "soda.db")
    out = tmp_path / "note.txt"
    config = Config(
        daemon=DaemonConfig(
            notify_command=f'echo "$SODA_EVENT $SODA_ITERATION $SODA_REASON" > {out}'
        )
    )
    config.root = tmp_path
    notify(config, "DONE", 4, "spec met", Events(db))
    assert out.read_text().strip() == "DONE 4 spec met"
    failing = Config(daemon=DaemonConfig(notify_command="exit 3"))
    failing.root = tmp_path
    notify(failing, "HALT", 5, "x", Events(db))  # a failing notifier is an event, not a crash
    assert db.execute("SELECT count(*) FROM events WHERE kind = 'notify.failed'").fetchone()[0] == 1


def test_recovery_closes_what_a_dead_process_left_open(tmp_path: Path) -> None:
    root = tmp_path / "project"
    config = load(prepare(root))
    db = open_db(config.db_path)
    events = Events(db)
    dead = subprocess.Popen(["true"])
    dead.wait()
    repo = Repo(root)
    git(root, "branch", "soda/spec", "main")
    git(root, "worktree", "add", "-q", str(config.state_dir / "worktrees" / "iter-1"), "soda/spec")
    run_id = insert_run(db, pid=dead.pid)
    with db.conn:
        db["iterations"].insert(
            {"run_id": run_id, "number": 1, "started_at": now(), "phase": "act"}
        )
        db["human_inputs"].insert(
            {
                "kind": "correction",
                "payload_json": '{"kind": "correction", "text": "x"}',
                "source": "inbox",
                "status": "claimed",
                "received_at": now(),
            }
        )
    report = recover(config, db, repo, events)
    assert report.aborted_iterations == [1] and report.aborted_runs == [run_id]
    assert report.worktrees_removed == 1 and report.inputs_released == 1
    row = db.execute("SELECT outcome, error, ended_at IS NOT NULL FROM iterations").fetchone()
    assert row == ("aborted", "aborted in phase act", 1)
    assert db.execute("SELECT status FROM runs").fetchone()[0] == "aborted"
    queue = HumanQueue(config.state_dir, db, events)
    assert [item.kind for item in queue.pending()] == ["correction"]
    assert "iter-1" not in git(root, "worktree", "list")
    assert not recover(config, db, repo, events).anything  # a second pass finds nothing
