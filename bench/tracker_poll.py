"""What an unchanged tracker costs the idle daemon: requests, requests that count
against GitHub's rate limit, model calls and wall time over many polls, against
the GitHub stand-in (tests/fakeforge.py, its answers checked against GitHub's
OpenAPI description) on 127.0.0.1, through the daemon's own look
(`Daemon._tick`, in this process) with `[tracker] poll_seconds = 0`, so every
look reads the tracker.

The tracker holds `--outsiders` issues labelled by people without write access
(kept as data), `--done` issues a writer labelled that soda finished, and one
that ended STUCK (its thread is read at each poll for a writer's reply), each
with `--comments` comments. Goal: after the first poll, every request is a
conditional GET answered 304 (0 rate-limited requests), and no poll makes a
model call (the model is a script with no answers: a call would HALT).

    python bench/tracker_poll.py [--polls 120] [--outsiders 20] [--done 10] [--comments 5]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.*

from soda.contracts.outcomes import RunStatus
from soda.daemon.process import Daemon
from soda.store import tracker as rows
from soda.system.lock import release_lock
from tests.fakeforge import TOKEN, FakeForge
from tests.sample import sample_project
from tests.tracker_scenario import SETTINGS


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--polls", type=int, default=120)
    parser.add_argument("--outsiders", type=int, default=20)
    parser.add_argument("--done", type=int, default=10)
    parser.add_argument("--comments", type=int, default=5)
    args = parser.parse_args()
    os.environ["GITHUB_TOKEN"] = TOKEN
    with tempfile.TemporaryDirectory(prefix="soda-tracker-poll-") as where:
        bare = Path(where) / "remote.git"
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
        forge = FakeForge(bare)
        forge.thread.start()
        scripted = {key: value for key, value in SETTINGS.items() if "scripted" not in value}
        settings = {
            **{k: v for k, v in scripted.items() if not k.startswith(("provider", "strong"))},
            'api_url = "https://api.github.com"': f'api_url = "{forge.url}"',
        }
        root = sample_project(Path(where), responses=[], settings=settings)
        for n in range(args.outsiders):
            number = forge.add_issue("mallory", "NONE", f"Outsider {n}", "- [ ] x", ("soda",))
            for c in range(args.comments):
                forge.add_issue_comment(number, "mallory", "NONE", f"comment {c}")
        writers = []
        for n in range(args.done + 1):
            number = forge.add_issue("alice", "OWNER", f"Work {n}", "- [ ] y", ("soda",))
            for c in range(args.comments):
                forge.add_issue_comment(number, "alice", "OWNER", f"note {c}")
            writers.append(number)
        daemon = Daemon(root / "soda.toml")
        run = daemon._preflight()
        issues = daemon.issues
        assert issues is not None
        try:
            issues.poll(force=True)  # the first read: everything is new
            for number in writers[:-1]:
                rows.set_state(run.db, number, "done", "done")
            rows.set_state(run.db, writers[-1], "stuck", "stuck")
            issues.poll(force=True)  # the stuck one's thread: read once as a writer's reply
            rows.set_state(run.db, writers[-1], "stuck", "stuck")  # and it stays stuck
            for comment in forge.issue_comments[writers[-1]]:
                rows.record_comment(
                    run.db,
                    rows.SeenComment(comment["id"], writers[-1], "alice", "OWNER", "input",
                                     None, comment["body"], None),
                )  # fmt: skip
            issues.poll(force=True)
            first_requests, first_costly = len(forge.requests), forge.costly
            began = time.perf_counter()
            for _ in range(args.polls):
                issues.last_poll = float("-inf")
                daemon._tick(run)
            elapsed = time.perf_counter() - began
            later = forge.requests[first_requests:]
            conditional = sum(1 for r in later if "if-none-match" in r.headers)
            not_modified = sum(1 for r in later if r.status == 304)
            calls = run.db.execute("SELECT count(*) FROM agent_calls").fetchone()[0]
            iterations = run.db.execute("SELECT count(*) FROM iterations").fetchone()[0]
        finally:
            run.finish(RunStatus.STOPPED, "bench over")
            release_lock(daemon.config.state_dir)
            run.db.conn.close()
            forge.server.shutdown()
            forge.server.server_close()
    total = args.outsiders + args.done + 1
    print(
        f"tracker: {total} labelled issues ({args.outsiders} outsiders'),"
        f" {args.comments} comments each"
    )
    print(f"first reads: {first_requests} requests, {first_costly} counted against the rate limit")
    print(
        f"{args.polls} unchanged polls: {len(later)} requests"
        f" ({len(later) / args.polls:.1f} a poll),"
        f" {conditional} conditional, {not_modified} answered 304,"
        f" {forge.costly - first_costly} counted against the rate limit"
    )
    print(f"model calls: {calls}; iterations: {iterations}")
    print(f"wall time: {elapsed / args.polls * 1000:.1f} ms a poll")
    return 0 if forge.costly == first_costly and calls == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
