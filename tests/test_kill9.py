"""kill -9 at random points: the daemon (the demo's scripted model) is SIGKILLed
after a random number of its events, over many bounded rounds; then the recovery
every start runs, and the checks: no process of soda left, no task stuck
in_progress, no soda-work branch or worktree registration left, every merge on
the milestone branch recorded as merged (and nothing else recorded as a merge),
every run and iteration record closed. A last restart runs the real daemon on
the killed project and stops it cleanly."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from git import Repo

from soda.cli.demo import SCRIPT_PATH, prepare
from soda.config import load
from soda.events import Events
from soda.loop.recovery import recover
from soda.repo import digest
from soda.repo.git import open_repo
from soda.store import open_db
from soda.store.digests import DigestRows
from soda.system.lock import acquire_lock, release_lock
from tests.conftest import git, wait_for
from tests.test_daemon import DEMO, query
from tests.test_wakes import NO_WORK, NOT_MET, VERIFIED

SEED = 20261123
"""The kill points are random but reproducible: a failure names its round and point."""
ROUNDS = 12
TIME_BUDGET_S = 15.0
"""Rounds start while the test has run less than this (at least MIN_ROUNDS)."""
MIN_ROUNDS = 3
LAST_KILL_EVENT = 33
"""The demo's first iteration (through its merge) emits about this many events."""


def soda_processes(root: Path) -> list[str]:
    """Live processes whose command line or directory is in `root`, but for this test
    and its own children (GitPython's helpers of prepare's repository)."""
    found = []
    needle = str(root).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state, parent = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:2]
            cwd = os.fsencode(os.readlink(entry / "cwd"))
        except (OSError, ValueError):
            continue
        if state in ("Z", "X") or int(parent) == os.getpid():
            continue
        if needle in cmdline or cwd.startswith(needle):
            words = cmdline.replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{entry.name}: {words}")
    return found


def lingering(root: Path, seconds: float) -> list[str]:
    """soda's processes in `root` still alive after up to `seconds` (none, we hope)."""
    deadline = time.monotonic() + seconds
    while (found := soda_processes(root)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def start_daemon(root: Path) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, "-m", "soda", "daemon-run"],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    ready = root / "state" / "daemon.ready"
    wait_for(
        lambda: (
            (ready.exists() and ready.read_text().strip() == str(process.pid))
            or process.poll() is not None
        ),
        30,
        "the daemon's readiness",
    )
    assert process.poll() is None, "the daemon exited before it was ready"
    return process


def events(root: Path) -> int:
    return query(root, "SELECT count(*) FROM events")[0][0]


def recover_as_a_start_does(root: Path) -> None:
    config = load(root / "soda.toml")
    acquire_lock(config.state_dir)
    try:
        db = open_db(config.db_path)
        recover(config, db, open_repo(root), Events(db))
        db.conn.close()
    finally:
        release_lock(config.state_dir)


def assert_nothing_left(root: Path, where: str) -> None:
    assert query(root, "SELECT id FROM runs WHERE status = 'running'") == [], where
    assert query(root, "SELECT number FROM iterations WHERE ended_at IS NULL") == [], where
    assert query(root, "SELECT id FROM tasks WHERE status = 'in_progress'") == [], where
    assert git(root, "for-each-ref", "refs/heads/soda-work/") == "", where
    worktrees = git(root, "worktree", "list", "--porcelain").count("worktree ")
    assert worktrees == 1, (where, git(root, "worktree", "list"))
    log = git(
        root,
        "log",
        "--first-parent",
        "--merges",
        "--format=%H %(trailers:key=Soda-Iteration,valueonly)",
        "soda/spec",
    )
    landed = {int(n): sha for sha, n in (line.split() for line in log.splitlines() if " " in line)}
    recorded = {
        number: (outcome, commit)
        for number, outcome, commit in query(
            root, "SELECT number, outcome, merged_commit FROM iterations"
        )
    }
    for number, sha in landed.items():
        assert recorded.get(number) == ("merged", sha), (where, number, recorded.get(number))
    merges = {n for n, (outcome, commit) in recorded.items() if outcome == "merged" or commit}
    assert merges == set(landed), (where, merges, landed)
    assert_digest_correct(root, where)


def assert_digest_correct(root: Path, where: str) -> None:
    """The milestone digest SENSE keeps (soda.repo.digest), however the kill left it,
    advances to what a rebuild from git alone says."""
    rows = query(root, "SELECT base_commit FROM runs WHERE base_commit IS NOT NULL LIMIT 1")
    if not rows:
        return
    base = rows[0][0]
    head = git(root, "rev-parse", "soda/spec")
    store = DigestRows(open_db(root / "state" / "soda.db"), "soda/spec", base)
    kept = digest.refresh(Repo(root), store, base, head, 10)
    fresh = DigestRows(open_db(root / "state" / "fresh-digest.db"), "soda/spec", base)
    rebuilt = digest.rebuild(Repo(root), fresh, base, head, 10)
    assert kept.state() == rebuilt.state(), where
    assert sorted(store.top(10**6)) == sorted(fresh.top(10**6)), where


def test_kill9_at_random_points_leaves_nothing_behind(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    demo = json.dumps({"responses": DEMO}).replace("{python}", json.dumps(sys.executable)[1:-1])
    began = time.monotonic()
    rounds: list[tuple[int, int]] = []
    root = tmp_path
    while len(rounds) < ROUNDS and (
        len(rounds) < MIN_ROUNDS or time.monotonic() - began < TIME_BUDGET_S
    ):
        root = tmp_path / f"round-{len(rounds)}"
        prepare(root)
        (root / SCRIPT_PATH).write_text(demo)
        point = rng.randint(1, LAST_KILL_EVENT)
        where = f"round {len(rounds)}, killed after event {point} (seed {SEED})"
        daemon = start_daemon(root)
        try:
            wait_for(
                lambda: events(root) >= point or daemon.poll() is not None,  # noqa: B023
                60,
                f"event {point}",
            )
            assert daemon.poll() is None, where
        finally:
            os.kill(daemon.pid, signal.SIGKILL)
            daemon.wait()
        # The jail's processes die with soda (bwrap --die-with-parent).
        assert lingering(root, 10) == [], where
        recover_as_a_start_does(root)
        assert_nothing_left(root, where)
        rounds.append((point, events(root)))
    assert len({point for point, _ in rounds}) >= MIN_ROUNDS  # different points were hit
    print(f"kill -9 rounds (kill point, events): {rounds} in {time.monotonic() - began:.1f} s")

    # A real restart on the last killed project: it recovers, works, stops cleanly.
    stuck = [
        {"agent": "verifier", "tool_calls": [{"name": "submit", "input": VERIFIED}]},
        {"agent": "assessor", "tool_calls": [{"name": "submit", "input": NOT_MET}]},
        {"agent": "planner", "tool_calls": [{"name": "submit", "input": NO_WORK}]},
    ]
    (root / SCRIPT_PATH).write_text(json.dumps({"responses": stuck}))
    daemon = start_daemon(root)
    try:
        wait_for(
            lambda: query(root, "SELECT 1 FROM runs WHERE status IN ('stuck', 'done')"),
            60,
            "the restarted daemon's settled run",
        )
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=30) == 0
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    assert lingering(root, 10) == []
    assert_nothing_left(root, "after the restart and a clean stop")
