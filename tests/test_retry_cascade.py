"""Smart retry and smart cascade, on the demo's sample project with the real gate
and a behavioural fake model: a failed task runs again with the description
the retrier wrote from the failure; a task whose dependencies all failed is
skipped with the reason, one with a finished dependency runs and is told what
is missing; a task waiting for an answer keeps its worktree and holds back its
dependents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from soda.llm.base import ModelRequest
from soda.llm.function import FunctionModel, Reply, call, first_turn, submit
from soda.loop.act.execute import WAITING_REASON
from soda.tools.toolbox import Suspended
from tests.conftest import git
from tests.test_parallel import (
    by_key,
    done,
    events,
    open_project,
    run_act,
    task,
    the_task,
    work_branches,
    writes,
)

PLAN_B = "Put the note in notes/b.txt, not in calc.py."


def advice(description: str, reason: str) -> Reply:
    return submit({"description": description, "reason": reason})


def test_a_task_that_gave_up_runs_again_with_the_rewritten_description(tmp_path: Path) -> None:
    seen: list[str] = []
    asked: list[str] = []

    def executor(request: ModelRequest) -> Reply:
        description = the_task(request)["description"]
        if first_turn(request):
            seen.append(description)
        if description != PLAN_B:
            return {"tool_calls": [{"name": "cannot_complete", "input": {"reason": "no room"}}]}
        return writes("notes/b.txt", "b")(request)

    def retrier(request: ModelRequest) -> Reply:
        asked.append(request.messages[0].text)
        return advice(PLAN_B, "calc.py had no room; a note file does")

    model = FunctionModel.by_agent({"executor": executor, "retrier": retrier})
    session = open_project(tmp_path, model, task_retries=1)
    tracked = session.tracker.create("write b", parent_id=session.milestone.root_task_id)
    result = run_act(session, task("b", task_id=tracked.id, description="Squeeze it into calc.py"))

    assert seen == ["Squeeze it into calc.py", PLAN_B]  # the second run saw the new text
    assert len(asked) == 1 and "kind: gave_up" in asked[0] and "no room" in asked[0]
    assert result.outcome == "merged"
    assert (result.tasks[0]["attempts"], result.tasks[0]["retries"]) == (
        2,
        ["calc.py had no room; a note file does"],
    )
    retried = events(session, "act.task.retried")
    assert [(r["key"], r["kind"], r["attempt"]) for r in retried] == [("b", "rewritten", 2)]
    comments = [c.body for c in session.tracker.comments(tracked.id)]
    assert any("retry 1: calc.py had no room" in body for body in comments)
    assert session.tracker.show(tracked.id).status == "closed"
    session.finish_run("done", "test")


def test_a_gate_failure_reaches_the_retrier_with_the_failing_test(tmp_path: Path) -> None:
    failures: list[str] = []

    def executor(request: ModelRequest) -> Reply:
        if "keep add" in the_task(request)["description"]:
            return writes("notes/divide.txt", "later")(request)
        if first_turn(request):  # breaks test_add: the gate holds it
            return call("edit_file", path="calc.py", old="return a + b", new="return a - b")
        return done("rewrote add")

    def retrier(request: ModelRequest) -> Reply:
        failures.append(request.messages[0].text)
        return advice("Add divide and keep add as it is.", "the change broke test_add")

    model = FunctionModel.by_agent({"executor": executor, "retrier": retrier})
    session = open_project(tmp_path, model, task_retries=1)
    result = run_act(session, task("a"))

    assert "kind: gate_failed" in failures[0] and "test_add" in failures[0]
    assert "calc.py" in failures[0]  # the failed attempt's diff stat
    assert [g["ok"] for g in events(session, "act.gate")] == [False, True]
    assert result.outcome == "merged" and result.tasks[0]["attempts"] == 2
    assert "return a + b" in git(session.config.root, "show", "soda/spec:calc.py")
    session.finish_run("done", "test")


def test_retries_are_bounded_and_the_last_failure_stands(tmp_path: Path) -> None:
    calls: list[str] = []

    def executor(request: ModelRequest) -> Reply:
        if first_turn(request):
            calls.append(the_task(request)["description"])
        return {"tool_calls": [{"name": "cannot_complete", "input": {"reason": "stuck"}}]}

    def retrier(request: ModelRequest) -> Reply:
        return advice(f"try {len(calls) + 1}", "another way")

    model = FunctionModel.by_agent({"executor": executor, "retrier": retrier})
    session = open_project(tmp_path, model, task_retries=2)
    tracked = session.tracker.create("hard", parent_id=session.milestone.root_task_id)
    result = run_act(session, task("h", task_id=tracked.id, description="try 1"))

    assert calls == ["try 1", "try 2", "try 3"]  # one run and two retries, no more
    assert result.outcome == "nothing_completed"
    assert (result.tasks[0]["status"], result.tasks[0]["attempts"]) == ("gave_up", 3)
    assert session.tracker.show(tracked.id).status == "blocked"
    assert len(events(session, "act.task.failed")) == 1
    session.finish_run("done", "test")


def test_no_retry_when_task_retries_is_zero(tmp_path: Path) -> None:
    def executor(request: ModelRequest) -> Reply:
        return {"tool_calls": [{"name": "cannot_complete", "input": {"reason": "stuck"}}]}

    # No retrier answer at all: asking it would be a ScriptError (a HALT).
    session = open_project(tmp_path, FunctionModel.by_agent({"executor": executor}))
    result = run_act(session, task("h"))
    assert result.tasks[0]["status"] == "gave_up" and result.tasks[0]["attempts"] == 1
    assert events(session, "act.task.retried") == []
    session.finish_run("done", "test")


def gives_up(request: ModelRequest) -> Reply:
    return {"tool_calls": [{"name": "cannot_complete", "input": {"reason": "blocked"}}]}


def test_cascade_skips_only_tasks_whose_dependencies_all_failed(tmp_path: Path) -> None:
    told: dict[str, Any] = {}

    def partial(request: ModelRequest) -> Reply:
        told["notes"] = the_task(request).get("notes")
        return writes("notes/d.txt", "d")(request)

    answers = {"a": gives_up, "b": writes("notes/b.txt", "b"), "d": partial}
    model = FunctionModel.by_agent({"executor": by_key(answers)})
    session = open_project(tmp_path, model)
    parent = session.milestone.root_task_id
    c_id = session.tracker.create("c", parent_id=parent).id
    result = run_act(
        session, task("a"), task("b"), task("c", "a", task_id=c_id), task("d", "a", "b")
    )

    status = {t["key"]: t["status"] for t in result.tasks}
    assert status == {"a": "gave_up", "b": "completed", "c": "skipped", "d": "completed"}
    # d ran with b's work merged and was told that a did not finish.
    assert told["notes"] and "['a'] did not finish" in told["notes"][0]
    assert "notes/b.txt" in git(session.config.root, "ls-tree", "-r", "--name-only", "soda/spec")
    skipped = events(session, "act.task.skipped")
    assert [(s["key"], s["reason"]) for s in skipped] == [
        ("c", "dependencies did not finish: ['a']")
    ]
    comments = [c.body for c in session.tracker.comments(c_id)]
    assert comments == ["skipped: dependencies did not finish: ['a']"]
    assert session.tracker.show(c_id).status == "open"
    session.finish_run("done", "test")


def test_a_waiting_task_keeps_its_worktree_and_holds_back_its_dependents(
    tmp_path: Path,
) -> None:
    def asks(request: ModelRequest) -> Reply:
        if first_turn(request):
            return call("write_file", path="notes/q.txt", content="half done")
        raise Suspended("Which rounding mode?", lambda messages, results, call_id: None)

    answers = {"q": asks, "later": writes("notes/later.txt", "x"), "free": writes("f.txt", "f")}
    model = FunctionModel.by_agent({"executor": by_key(answers)})
    session = open_project(tmp_path, model)
    result = run_act(session, task("q"), task("free"), task("later", "q"))

    by = {t["key"]: t for t in result.tasks}
    assert by["q"]["status"] == "waiting" and by["q"]["reason"] == "Which rounding mode?"
    assert by["free"]["status"] == "completed"
    assert by["later"]["status"] == "skipped" and WAITING_REASON in by["later"]["reason"]
    kept = session.checkouts.kept()
    assert list(kept) == ["soda-work/spec/iter-1-q"]
    path = kept["soda-work/spec/iter-1-q"]
    assert (path / "notes" / "q.txt").read_text() == "half done"  # the work is still there
    assert work_branches(session).split() == ["+", "soda-work/spec/iter-1-q"]  # checked out
    assert [w["key"] for w in events(session, "act.task.waiting")] == ["q"]
    session.finish_run("done", "test")
    assert path.exists()  # the end of a run leaves a kept worktree
