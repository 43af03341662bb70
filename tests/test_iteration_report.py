"""The iteration report and the plan events: each iteration that reaches DECIDE
ends with a report (done, failed, skipped, retried, waiting, open questions,
confidence) stored in `iterations.report_json` and printed by `soda show N`;
ACT's plan is framed by plan.started and plan.completed / plan.failed."""

from __future__ import annotations

import json
from pathlib import Path

from soda.llm.base import ModelRequest
from soda.llm.function import Reply, call
from soda.loop.run import Ending, run_loop
from tests.conftest import soda
from tests.plan_fakes import (
    events,
    executor,
    fake_model,
    key_of,
    new_project,
    open_session,
    plan,
    set_key,
    task,
)

DAG = plan(task("a"), task("b", "a"), task("c", "b"))


def report_of(session, number: int = 1) -> dict:
    row = session.db.execute(
        "SELECT report_json FROM iterations WHERE number = ?", [number]
    ).fetchone()
    return json.loads(row[0])


def test_a_plan_that_lands_reports_its_tasks_and_completes(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    session = open_session(root, fake_model(DAG))
    lines: list[str] = []
    result = run_loop(session, lines.append, once=True)
    assert result.ending is Ending.CONTINUE, lines
    report = report_of(session)
    assert report == {
        "outcome": report["outcome"],
        "planned": 3,
        "done": 3,
        "failed": 0,
        "skipped": 0,
        "retried": 0,
        "waiting": 0,
        "open_questions": 0,
        "confidence": "medium",
    }
    assert report["outcome"] == "merged"
    assert (
        "report: 3 done, 0 failed, 0 skipped, 0 retried, 0 waiting; 0 open questions;"
        " confidence medium"
    ) in lines
    (started,) = events(session, "plan.started")
    assert started == {"plan": 1, "intent": DAG["intent"], "tasks": 3, "batches": 3}
    (completed,) = events(session, "plan.completed")
    assert completed["plan"] == 1 and completed["done"] == 3 and completed["failed"] == 0
    assert events(session, "plan.failed") == []
    shown = soda("show", "1", cwd=root)
    assert shown.returncode == 0, shown.stderr
    assert "REPORT\n  3 done, 0 failed, 0 skipped, 0 retried, 0 waiting" in shown.stdout


def test_a_failed_task_and_its_skipped_dependent_fail_the_plan(tmp_path: Path) -> None:
    def gives_up_on_b(request: ModelRequest) -> Reply:
        if key_of(request) == "b":
            return call("cannot_complete", reason="b cannot be done")
        return executor(request)

    root = new_project(tmp_path)
    set_key(root, "task_retries", "0")
    session = open_session(root, fake_model(DAG, executor=gives_up_on_b))
    run_loop(session, lambda line: None, once=True)
    report = report_of(session)
    assert (report["done"], report["failed"], report["skipped"]) == (1, 1, 1)
    (failed,) = events(session, "plan.failed")
    assert (failed["done"], failed["failed"], failed["skipped"]) == (1, 1, 1)
    assert events(session, "plan.completed") == []


def test_an_iteration_without_act_still_reports(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    session = open_session(root, fake_model(None))  # no plan: STUCK
    result = run_loop(session, lambda line: None, once=True)
    assert result.ending is Ending.STUCK
    report = report_of(session)
    assert report["planned"] == 0 and report["confidence"] == "medium"
    assert events(session, "plan.started") == []


def test_a_plan_whose_act_halts_ends_in_plan_failed_with_the_error(tmp_path: Path) -> None:
    from soda.llm.function import submit

    root = new_project(tmp_path)
    broken = fake_model(DAG, executor=lambda request: submit({"summary": 42}))
    session = open_session(root, broken)
    assert run_loop(session, lambda line: None, once=True).ending is Ending.HALT
    assert events(session, "plan.failed") == [{"plan": 1, "error": "ContractViolation"}]
