"""Approval waits in the fleet: a plan that needs a person is kept in the
workflow, which waits with a durable timer while no worker holds the run (the
worker's slot is free for another run), and the next iteration, on whichever
worker, runs the plan as approved or edited, or rejects it at the deadline
even when every worker was down while it passed. A merge the gate may not make
alone waits the same way, its work kept on the remote, and lands through
another worker when the one that held it is lost. The real Temporal dev
server, `soda worker`s as real subprocesses, bare remotes, the real jail; the
only fake is the scripted model committed in each sample project."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from soda.contracts.outcomes import TaskStatus
from soda.fleet.iteration import HeldRun, Progress, run_one
from soda.fleet.state import HumanSignal, IterationReport, IterationRequest, RunSettings
from soda.store import tasks
from tests.conftest import git, wait_for
from tests.fleet_helpers import (
    DEMO,
    WorkerProcess,
    by_iteration,
    describe,
    remote_project,
    start_worker,
)
from tests.fleet_helpers import wait_status as wait_for_status
from tests.test_fleet import RUN_SECONDS, Server, fleet, landed, submit, worker_db
from tests.test_merge_approval import conftest_script


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    started = Server(tmp_path_factory.mktemp("temporal"))
    yield started
    started.stop()


@pytest.fixture
def workers() -> Iterator[list[WorkerProcess]]:
    """The workers a test starts; each is killed (by pid) when the test ends."""
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.stop()


APPROVED = by_iteration(DEMO[:5], DEMO[5:10], DEMO[10:])
"""The demo with its plan waiting for approval: iteration 1 plans, iteration 2
runs the approved plan, iteration 3 finds the spec met."""
HELD_MERGE = by_iteration(conftest_script()[:10], [], conftest_script()[10:])
"""Iteration 1 holds its merge; iteration 2 merges the kept work (no model call);
iteration 3 finds the spec met."""


def approving(
    tmp_path: Path, name: str, timeout: float, script: list[dict[str, Any]] = APPROVED
) -> tuple[str, Path]:
    """A sample project whose plans all wait for approval (threshold low), and the
    soda.toml to submit it with."""
    url = remote_project(tmp_path, name, script)
    text = (tmp_path / f"{name}-src" / "soda.toml").read_text()
    text = text.replace('risk_threshold = "high"', 'risk_threshold = "low"')
    config = tmp_path / f"{name}.toml"
    config.write_text(text.replace("timeout = 3600.0", f"timeout = {timeout}"))
    return url, config


def waiting_for_approval(server: Server, run: str, number: int) -> dict[str, Any]:
    """Wait until the run holds iteration `number`'s plan for approval; its description."""

    def held() -> dict[str, Any] | None:
        seen = describe(server.address, run)
        approval = seen.get("approval")
        if seen["status"]["status"] == "waiting" and approval and approval["iteration"] == number:
            return seen
        return None

    found: dict[str, Any] = wait_for(held, RUN_SECONDS, f"{run} to wait for approval")
    return found


def rows(done: dict[str, Any]) -> list[tuple[int, str, str]]:
    return [(h["number"], h["decision"], h["outcome"]) for h in done["history"]]


def events(worker: WorkerProcess, run: str, kind: str) -> list[dict[str, Any]]:
    with sqlite3.connect(f"file:{worker_db(worker, run)}?mode=ro", uri=True, timeout=5) as db:
        found = db.execute("SELECT data_json FROM events WHERE kind = ? ORDER BY id", [kind])
        return [json.loads(row[0]) for row in found]


def test_a_waiting_plan_frees_its_slot_and_runs_when_approved_on_another_worker(
    server: Server, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    workers.append(start_worker(server.address, tmp_path, "one", slots=1))
    url, config = approving(tmp_path, "waits", timeout=600)
    run = submit(server, url, "--config", str(config), "--keep-checkout")  # read after DONE
    held = waiting_for_approval(server, run, 1)
    status = held["status"]
    assert status["worker"] is None  # the wait holds no worker
    assert status["waiting_for"].startswith("approval of iteration 1's plan until ")
    assert status["approval_deadline"] in status["waiting_for"]
    assert rows(held) == [(1, "STUCK", "awaiting_approval")]
    # The one slot is free: another run takes it and finishes while the plan waits.
    other_url = remote_project(tmp_path, "meanwhile")
    other = submit(server, other_url)
    finished = wait_for_status(server.address, other, {"done"}, RUN_SECONDS)
    assert {h["worker"] for h in finished["history"]} == {workers[0].name}
    # Only a verdict on the waiting plan ends the wait: a correction waits with it.
    assert fleet(server, "tell", run, "keep the names short").exit_code == 0
    wrong = fleet(server, "approve", run, "7")
    assert wrong.exit_code == 2 and "iteration 1's plan waits" in wrong.output, wrong.output
    time.sleep(1)
    still = describe(server.address, run)
    assert still["status"]["status"] == "waiting" and still["status"]["pending_inputs"] == 1
    # The approval comes while no worker holds the run, and another worker runs the
    # plan: from the workflow's state, not the first worker's record.
    workers[0].kill()
    workers.append(start_worker(server.address, tmp_path, "two", slots=1))
    assert fleet(server, "approve", run, "1").exit_code == 0
    done = wait_for_status(server.address, run, {"done"}, RUN_SECONDS)
    assert rows(done) == [
        (1, "STUCK", "awaiting_approval"),
        (2, "CONTINUE", "merged"),
        (3, "DONE", "done"),
    ]
    assert [h["worker"] for h in done["history"]][1:] == [workers[1].name] * 2
    assert landed(url) == ["2"]
    (verdict,) = events(workers[1], run, "approval.verdict")
    assert verdict == {"iteration": 1, "approved": True, "reason": "approved by a person: approved"}
    with sqlite3.connect(worker_db(workers[1], run)) as db:
        inputs = db.execute("SELECT kind, source, status FROM human_inputs ORDER BY id")
        assert inputs.fetchall() == [
            ("correction", "fleet", "applied"),  # read by iteration 3's ORIENT
            ("approve", "fleet", "applied"),
        ]
        titles = db.execute("SELECT status FROM tasks WHERE parent_id IS NOT NULL").fetchall()
        assert ("closed",) in titles  # the plan's Trace task, made again here, closed


def test_the_deadline_holds_with_every_worker_down(
    server: Server, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    timeout = 5
    url, config = approving(
        tmp_path, "lapses", timeout, script=by_iteration(DEMO[:5], [], DEMO[:5])
    )
    workers.append(start_worker(server.address, tmp_path, "first", slots=1))
    run = submit(server, url, "--config", str(config))
    held = waiting_for_approval(server, run, 1)
    workers[0].kill()  # every worker is down while the deadline passes
    deadline = held["approval"]["deadline"]
    assert time.time() < deadline - 1, "too slow to see the wait before its deadline"
    time.sleep(max(0.0, deadline - time.time()) + 0.5)
    shown = fleet(server, "status", run)  # the server answers with every worker down
    assert "waiting_for: approval of iteration 1's plan until" in shown.output, shown.output
    workers.append(start_worker(server.address, tmp_path, "second", slots=1))
    # The timer fired in the workflow: the new worker rejects the plan at once
    # (it does not wait again), and the run plans anew (iteration 3 asks again).
    again = waiting_for_approval(server, run, 3)
    assert rows(again) == [
        (1, "STUCK", "awaiting_approval"),
        (2, "CONTINUE", "rejected"),
        (3, "STUCK", "awaiting_approval"),
    ]
    assert again["history"][1]["seconds"] < timeout
    (verdict,) = events(workers[1], run, "approval.verdict")
    assert verdict == {
        "iteration": 1,
        "approved": False,
        "reason": f"no approval within {timeout}s",
    }
    assert landed(url) == []
    assert fleet(server, "stop", run).exit_code == 0
    wait_for_status(server.address, run, {"stopped"}, 30)


def test_a_plan_edited_through_the_fleet_is_the_plan_that_runs(
    server: Server, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    workers.append(start_worker(server.address, tmp_path, "editor", slots=1))
    url, config = approving(tmp_path, "edited", timeout=600)
    run = submit(server, url, "--config", str(config), "--keep-checkout")  # read after DONE
    waiting_for_approval(server, run, 1)
    shown = json.loads(fleet(server, "status", run, "--json").output)
    plan = shown["approval"]["plan"]
    path = tmp_path / "plan.json"
    bad = json.loads(json.dumps(plan))
    bad["tasks"][0]["task_id"] = 999
    path.write_text(json.dumps(bad))
    refused = fleet(server, "approve", run, "1", "--edit", str(path))
    assert refused.exit_code == 2, refused.output
    assert "edited plan refused: task 'a' names Trace task 999" in refused.output
    assert "the original plan still waits" in refused.output
    path.write_text("{not json")
    assert "invalid JSON" in fleet(server, "approve", run, "1", "--edit", str(path)).output
    plan["intent"] = "Add divide, as the person put it"
    plan["tasks"][0]["title"] = "Add divide (edited)"
    path.write_text(json.dumps(plan))
    sent = fleet(server, "approve", run, "1", "--edit", str(path))
    assert sent.exit_code == 0 and "sent" in sent.output, sent.output
    done = wait_for_status(server.address, run, {"done"}, RUN_SECONDS)
    assert rows(done)[1:] == [(2, "CONTINUE", "merged"), (3, "DONE", "done")]
    (edited,) = events(workers[0], run, "approval.edited")
    assert edited["iteration"] == 1 and edited["intent"] == "Add divide, as the person put it"
    with sqlite3.connect(worker_db(workers[0], run)) as db:
        act = json.loads(
            db.execute("SELECT act_json FROM iterations WHERE number = 2").fetchone()[0]
        )
        kind = db.execute("SELECT kind, source, status FROM human_inputs").fetchall()
    assert [task["title"] for task in act["tasks"]] == ["Add divide (edited)"]
    assert kind == [("plan_edit", "fleet", "applied")]


def test_a_fresh_worker_takes_up_the_waiting_plan_from_the_workflow(tmp_path: Path) -> None:
    """The worker's part without Temporal: the report carries the waiting plan; a
    fresh worker given it (and the person's approval) runs it, its Trace tasks
    made again with their ids."""
    url, config = approving(tmp_path, "fresh", timeout=600)
    settings = RunSettings(url, config_text=config.read_text())
    first_worker, second_worker = HeldRun(), HeldRun()
    try:
        first = run_one(
            tmp_path / "a",
            "a",
            IterationRequest("run", settings, 1, True, [], [], []),
            Progress(),
            print,
            first_worker,
        )
        assert (first.summary.ending, first.summary.outcome) == ("stuck", "awaiting_approval")
        waiting = first.approval
        assert waiting is not None and waiting.iteration == 1 and not waiting.expired
        ids = [task["task_id"] for task in waiting.plan["tasks"]]
        assert ids and set(ids) <= set(waiting.known_tasks)
        second = _approved_on_a_fresh_worker(tmp_path, settings, first, second_worker)
        assert (second.summary.ending, second.summary.outcome) == ("continue", "merged")
        assert second.approval is None and second.delivered == [1]
        run = second_worker.run
        assert run is not None
        closed = [t.id for t in tasks.of_milestone(run.db, run.milestone.name, TaskStatus.CLOSED)]
        assert set(ids) <= set(closed)
    finally:
        first_worker.close()
        second_worker.close()


# --- merges the gate may not make alone ---------------------------------------

KEPT = "refs/soda/approvals/1-a"


def remote_ref(url: str, name: str) -> str | None:
    return git(Path(url), "for-each-ref", "--format=%(objectname)", name) or None


def test_a_fresh_worker_merges_a_held_merge_from_the_remote(tmp_path: Path) -> None:
    """The worker's part without Temporal: the held merge's work reaches the
    remote with the report; a fresh worker given the approval fetches it and
    merges it (the gate run again there), and the kept ref goes."""
    url = remote_project(tmp_path, "kept", HELD_MERGE)
    settings = RunSettings(url)
    first_worker, second_worker = HeldRun(), HeldRun()
    try:
        first = run_one(
            tmp_path / "a",
            "a",
            IterationRequest("run", settings, 1, True, [], [], []),
            Progress(),
            print,
            first_worker,
        )
        assert (first.summary.ending, first.summary.outcome) == ("stuck", "awaiting_approval")
        waiting = first.approval
        assert waiting is not None and waiting.kind == "merge"
        assert waiting.what == "merge of task 2"
        (kept,) = waiting.merges
        assert remote_ref(url, KEPT) == kept["commit"]  # pushed before the report
        second = _approved_on_a_fresh_worker(tmp_path, settings, first, second_worker)
        assert (second.summary.ending, second.summary.outcome) == ("continue", "merged")
        assert second.approval is None and second.delivered == [1]
        assert landed(url) == ["2"]
        assert "the project's shared" in git(Path(url), "show", "soda/spec:tests/conftest.py")
        assert remote_ref(url, KEPT) is None  # spent: deleted on the remote too
        run = second_worker.run
        assert run is not None
        assert 2 in [
            t.id for t in tasks.of_milestone(run.db, run.milestone.name, TaskStatus.CLOSED)
        ]
        calls = run.db.execute("SELECT count(*) FROM agent_calls WHERE agent = 'executor'")
        assert calls.fetchone()[0] == 0  # the kept work merged: no executor ran here
    finally:
        first_worker.close()
        second_worker.close()


def test_a_held_merge_outlives_its_worker_and_lands_on_another(
    server: Server, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    workers.append(start_worker(server.address, tmp_path, "holder", slots=1))
    url = remote_project(tmp_path, "held", HELD_MERGE)
    run = submit(server, url, "--keep-checkout")  # read after DONE
    held = waiting_for_approval(server, run, 1)
    status = held["status"]
    assert status["worker"] is None  # the wait holds no worker
    assert status["waiting_for"].startswith("approval of iteration 1's merge of task 2 until ")
    assert rows(held) == [(1, "STUCK", "awaiting_approval")]
    waiting = held["approval"]
    assert waiting["kind"] == "merge"
    (kept,) = waiting["merges"]
    assert kept["items"] == ["changes test infrastructure: tests/conftest.py"]
    assert remote_ref(url, KEPT) == kept["commit"] and landed(url) == []
    shown = fleet(server, "status", run)
    assert "waiting_for: approval of iteration 1's merge of task 2 until" in shown.output
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(waiting["plan"]))
    edit = fleet(server, "approve", run, "1", "--edit", str(path))
    assert edit.exit_code == 2 and "nothing to edit" in edit.output, edit.output
    # The worker that held the run (its checkout, its record, the kept ref) is
    # lost during the wait; the approval lands through another one.
    workers[0].kill()
    workers.append(start_worker(server.address, tmp_path, "taker", slots=1))
    assert fleet(server, "approve", run, "1").exit_code == 0
    done = wait_for_status(server.address, run, {"done"}, RUN_SECONDS)
    assert rows(done) == [
        (1, "STUCK", "awaiting_approval"),
        (2, "CONTINUE", "merged"),
        (3, "DONE", "done"),
    ]
    assert [h["worker"] for h in done["history"]] == [workers[0].name] + [workers[1].name] * 2
    assert landed(url) == ["2"]
    assert "the project's shared" in git(Path(url), "show", "soda/spec:tests/conftest.py")
    assert remote_ref(url, KEPT) is None
    (restored,) = events(workers[1], run, "act.task.restored")
    assert restored["commit"] == kept["commit"]
    gate = events(workers[1], run, "act.gate")
    assert [(g["plan"], g["approval"]) for g in gate] == [(2, kept["items"])]
    (verdict,) = events(workers[1], run, "approval.verdict")
    assert verdict == {"iteration": 1, "approved": True, "reason": "approved by a person: approved"}
    with sqlite3.connect(worker_db(workers[1], run)) as db:
        calls = db.execute("SELECT count(*) FROM agent_calls WHERE agent = 'executor'")
        assert calls.fetchone()[0] == 0


def _approved_on_a_fresh_worker(
    tmp_path: Path, settings: RunSettings, first: IterationReport, worker: HeldRun
) -> IterationReport:
    """Iteration 2 on worker "b", fresh (no record of its own), with the
    person's approval of iteration 1 and the wait `first` reported."""
    approve = HumanSignal(1, "approve", {"kind": "approve", "target": 1})
    request = IterationRequest(
        "run", settings, 2, True, [first.summary], [approve], [], first.approval,
    )  # fmt: skip
    return run_one(tmp_path / "b", "b", request, Progress(), print, worker)
