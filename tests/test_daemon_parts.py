"""The daemon's parts in-process: windows, the lock, log rotation, notifications,
and crash recovery on a real repository and database."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from git import Repo

from soda.cli.demo import prepare
from soda.config import Config, DaemonConfig, load
from soda.daemon.parts import keep_watching, rotate_log
from soda.daemon.process import LOG_NAME, Daemon
from soda.errors import ConfigError, UserError
from soda.events import Events, notify
from soda.human import HumanQueue
from soda.loop.recovery import recover
from soda.store import open_db
from soda.store.db import now
from soda.system.lock import PID_NAME, acquire_lock, release_lock, running_pid
from soda.system.windows import in_window, parse_windows
from tests.conftest import git, insert_run, wait_for


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


# --- the watcher cannot die silently -------------------------------------------


def test_keep_watching_restarts_a_failed_watch_with_a_growing_bounded_backoff() -> None:
    stopping = threading.Event()
    calls: list[str] = []
    errors: list[tuple[str, float]] = []

    def watch() -> None:
        calls.append("watch")
        number = calls.count("watch")
        if number <= 3:
            raise OSError(f"failure {number}")
        if number == 4:
            return  # ends without being asked to: a failure too
        stopping.wait()  # a healthy watch, until the daemon stops

    thread = threading.Thread(
        target=keep_watching,
        args=(
            watch,
            stopping,
            lambda e, w: errors.append((str(e), w)),
            lambda: calls.append("restart"),
        ),
        kwargs={"backoff": 0.01, "max_backoff": 0.03},
        daemon=True,
    )
    thread.start()
    wait_for(lambda: calls.count("watch") == 5, 10, "the fifth watch")
    stopping.set()
    thread.join(5)

    assert not thread.is_alive()
    assert errors == [
        ("failure 1", 0.01),
        ("failure 2", 0.02),
        ("failure 3", 0.03),
        ("the watch ended on its own", 0.03),
    ]
    assert calls == ["watch", "restart"] * 4 + ["watch"]


def test_keep_watching_stops_during_a_backoff() -> None:
    stopping = threading.Event()

    def watch() -> None:
        stopping.set()  # the daemon stops while the watch fails
        raise OSError("boom")

    started = time.monotonic()
    keep_watching(watch, stopping, lambda e, w: None, lambda: None, backoff=30)
    assert time.monotonic() - started < 5


def restarts(db_path: Path) -> list[dict[str, Any]]:
    db = sqlite3.connect(db_path, timeout=10)
    try:
        found = db.execute("SELECT data_json FROM events WHERE kind = 'watcher.restarted'")
        return [json.loads(row[0]) for row in found.fetchall()]
    finally:
        db.close()


def wakes_on_a_new_file(daemon: Daemon, inbox: Path, seconds: float = 15) -> None:
    """A file dropped into the inbox wakes the daemon (tried again while the watch
    is still coming up), and not by the watch failing again."""
    before = len(restarts(daemon.config.db_path))
    deadline = time.monotonic() + seconds
    number = 0
    while time.monotonic() < deadline:
        daemon.wake.clear()
        number += 1
        (inbox / f"later-{number}.md").write_text("x")
        if daemon.wake.wait(0.5):
            assert len(restarts(daemon.config.db_path)) == before
            return
    raise AssertionError(f"no wake within {seconds}s of dropping files")


def test_the_watcher_restarts_after_real_errors_and_still_hears_the_inbox(tmp_path: Path) -> None:
    daemon = Daemon(prepare(tmp_path / "project"))
    inbox = daemon.config.state_dir / "inbox"
    watcher = threading.Thread(target=daemon._watch, daemon=True)
    watcher.start()
    try:
        inbox.mkdir(parents=True, exist_ok=True)
        wakes_on_a_new_file(daemon, inbox)

        shutil.rmtree(inbox)  # the watched directory vanishes
        [gone] = wait_for(lambda: restarts(daemon.config.db_path), 10, "the first restart")
        assert "was removed" in gone["error"]
        wait_for(inbox.is_dir, 10, "the inbox made again")
        wakes_on_a_new_file(daemon, inbox)

        with open(os.path.join(os.fsencode(inbox), b"\xff\xfe.md"), "wb") as fh:
            fh.write(b"hi")  # a name watchfiles cannot decode breaks the watch
        both = wait_for(
            lambda: restarts(daemon.config.db_path)[1:], 10, "the restart after the bad name"
        )
        assert "decode" in both[0]["error"]
        assert both[0]["backoff_seconds"] > 0
        wakes_on_a_new_file(daemon, inbox)
        assert watcher.is_alive()
    finally:
        daemon.stopping.set()
        watcher.join(10)
    assert not watcher.is_alive()


def test_a_daemon_survives_a_hostile_inbox_and_still_hears_files(tmp_path: Path) -> None:
    root = tmp_path / "project"
    config = prepare(root)
    # With ticks an hour apart, only the watcher can make the daemon notice a file.
    config.write_text(config.read_text().replace("tick_seconds = 5.0", "tick_seconds = 3600.0"))
    assert "tick_seconds = 3600.0" in config.read_text()
    inbox = root / "state" / "inbox"
    (inbox / ".claimed").mkdir(parents=True, exist_ok=True)
    long_name = "l" * 246 + ".json"
    (inbox / long_name).write_text("{")
    (inbox / ".claimed" / long_name).write_text("{ stranded by a crash")  # same name
    os.mkfifo(inbox / "pipe.md")
    outside = tmp_path / "outside.md"
    outside.write_text("not for soda")
    (inbox / "link.md").symlink_to(outside)
    (inbox / "folder").mkdir()
    (inbox / "folder" / "a.md").write_text("x")
    stamp = time.time() - 60
    for entry in [*os.scandir(inbox), *os.scandir(inbox / ".claimed")]:
        os.utime(entry.path, (stamp, stamp), follow_symlinks=False)
    db_path = root / "state" / "soda.db"

    def query(sql: str) -> list[tuple]:
        db = sqlite3.connect(db_path, timeout=10)
        try:
            return db.execute(sql).fetchall()
        finally:
            db.close()

    log = (tmp_path / "daemon.log").open("wb")
    daemon = subprocess.Popen(
        [sys.executable, "-m", "soda", "daemon-run"], cwd=root, stdout=log, stderr=log
    )
    try:
        wait_for(lambda: query("SELECT 1 FROM iterations WHERE decision = 'DONE'"), 90, "DONE")
        rejected = inbox / "rejected"
        reasons = sorted(p.read_text() for p in rejected.glob("*.reason"))
        assert len(reasons) == 5, reasons
        # the namesake stranded mid-claim came back beside it under a shortened name
        assert sum(r.startswith("l" * 200) and "invalid JSON" in r for r in reasons) == 2
        assert any(r.startswith(f"{long_name}: invalid JSON") for r in reasons)
        assert outside.read_text() == "not for soda"
        assert sorted(os.listdir(inbox)) == [".claimed", ".lock", "processed", "rejected"]

        with open(os.path.join(os.fsencode(inbox), b"\xff\xfe.md"), "wb") as fh:
            fh.write(b"words")
        wait_for(
            lambda: any(name.startswith(b"\xff\xfe") for name in os.listdir(os.fsencode(rejected))),
            15,
            "the rejection of the non-UTF-8 name",
        )
        assert query("SELECT 1 FROM events WHERE kind = 'watcher.restarted'")
        settled = [".claimed", ".lock", "processed", "rejected"]
        wait_for(lambda: sorted(os.listdir(inbox)) == settled, 15, "the ingest's own moves")
        (inbox / "hold.json").write_text('{"kind": "pause"}')
        wait_for(
            lambda: query("SELECT 1 FROM human_inputs WHERE kind = 'pause'"),
            15,
            "the pause, heard by the watcher",
        )
        assert daemon.poll() is None
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=30) == 0
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        log.close()
