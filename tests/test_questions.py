"""Questions to the person: the executor's `ask_human` stores and announces the
question and suspends its task (its work kept) while the other tasks go on; the
question outlives the session; `soda answer` (or an inbox file) answers it, and
the next iteration resumes the task where it stopped, without replanning, with
the answer as the tool's result."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from soda.config import load
from soda.llm.base import Message, ModelRequest, ToolCall
from soda.llm.function import FunctionModel, Reply, call, first_turn, submit
from soda.loop.asking import (
    RESUME_REF,
    conversation_json,
    open_questions,
    resumed_conversation,
)
from soda.loop.run import Ending, run_loop
from soda.loop.session import Session
from soda.repo.milestone import milestone_branch
from soda.store import questions
from tests.conftest import git, soda
from tests.plan_fakes import (
    done,
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

PLAN = plan(task("a", title="Pick the rounding"), task("b", title="Independent work"))
QUESTION = "Which rounding mode should divide use?"
ANSWERED = "The person answered: "


def results(request: ModelRequest) -> list[str]:
    return [r.content for m in request.messages for r in m.tool_results]


def asking_executor(seen: list[list[str]]) -> Any:
    """Task a writes a draft, asks, and after the answer writes it down; other
    tasks are the plain executor. `seen` keeps each request's tool results."""

    def answer(request: ModelRequest) -> Reply:
        if key_of(request) != "a":
            return executor(request)
        seen.append(results(request))
        answers = [r[len(ANSWERED) :] for r in results(request) if r.startswith(ANSWERED)]
        latest = [r.content for r in request.messages[-1].tool_results]
        if answers and any(r.startswith(ANSWERED) for r in latest):
            return call("write_file", path="notes/a.txt", content=answers[0])
        if answers:
            return done("rounding as the person said")
        if first_turn(request):
            return call("write_file", path="notes/a-draft.txt", content="draft")
        return call("ask_human", question=QUESTION)

    return answer


def on_milestone(root: Path, path: str) -> str | None:
    branch = milestone_branch(load(root / "soda.toml"))
    try:
        return git(root, "show", f"{branch}:{path}")
    except Exception:
        return None


def test_a_question_suspends_its_task_survives_a_restart_and_the_answer_resumes_it(
    tmp_path: Path,
) -> None:
    root = new_project(tmp_path)
    set_key(root, "notify_command", '"echo $SODA_EVENT $SODA_ITERATION >> state/notified.txt"')
    seen: list[list[str]] = []
    model = fake_model(PLAN, executor=asking_executor(seen))

    # Iteration 1: a asks and waits, b goes on and merges.
    session = open_session(root, model)
    assert run_loop(session, lambda line: None, once=True).ending is Ending.CONTINUE
    (asked,) = open_questions(session.db)
    assert (asked.id, asked.question, asked.task_key, asked.status) == (1, QUESTION, "a", "open")
    assert events(session, "question.asked")[0]["text"] == QUESTION
    act = json.loads(session.db.execute("SELECT act_json FROM iterations").fetchone()[0])
    assert {t["key"]: t["status"] for t in act["tasks"]} == {"a": "waiting", "b": "completed"}
    assert on_milestone(root, "notes/b.txt") == "Independent work"
    assert on_milestone(root, "notes/a-draft.txt") is None  # a's work is not merged
    assert git(root, "cat-file", "-t", RESUME_REF.format(1)) == "commit"
    assert (root / "state" / "notified.txt").read_text().split() == ["QUESTION", "1"]
    report = json.loads(session.db.execute("SELECT report_json FROM iterations").fetchone()[0])
    assert (report["waiting"], report["open_questions"]) == (1, 1)
    shown = soda("show", "1", cwd=root).stdout
    assert f"question 1 (open, task a): {QUESTION}" in shown

    # The person answers through the CLI; a wrong id is one line, exit 2.
    wrong = soda("answer", "7", "whatever", cwd=root)
    assert wrong.returncode == 2
    assert wrong.stderr.strip() == "soda: no question 7 (see `soda status`)"
    done = soda("answer", "1", "half even", cwd=root)
    assert done.returncode == 0, done.stderr

    # A new session (as after a restart): recovery ran, the question is still there.
    session = Session.open(load(root / "soda.toml"), model=model)
    assert [q.id for q in open_questions(session.db)] == [1]
    calls_before = session.db.execute("SELECT count(*) FROM agent_calls").fetchone()[0]
    assert run_loop(session, lambda line: None, once=True).ending is Ending.CONTINUE
    assert questions.get(session.db, 1).status == "resumed"
    assert open_questions(session.db) == []
    # No replanning: iteration 2 called only the executor, which went on from its
    # conversation (its first request already held the answer and the draft's result).
    agents = session.db.execute(
        "SELECT DISTINCT agent FROM agent_calls WHERE id > ?", [calls_before]
    ).fetchall()
    assert agents == [("executor",)]
    resumed = next(r for r in seen if any(x.startswith(ANSWERED) for x in r))
    assert resumed[-1] == f"{ANSWERED}half even" and len(resumed) == 2
    assert on_milestone(root, "notes/a.txt") == "half even"
    assert on_milestone(root, "notes/a-draft.txt") == "draft"  # the work before the question
    row = session.db.execute("SELECT orient_json, outcome FROM iterations WHERE number = 2")
    orient_json, outcome = row.fetchone()
    assert outcome == "merged"
    assert [t["id"] for t in json.loads(orient_json)["iteration_plan"]["tasks"]] == ["a"]


def test_an_inbox_answer_is_recorded_at_sense(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    session = open_session(root, fake_model(PLAN, executor=asking_executor([])))
    run_loop(session, lambda line: None, once=True)
    inbox = root / "state" / "inbox"
    (inbox / "answer.json").write_text(json.dumps({"kind": "answer", "target": 1, "text": "up"}))
    (inbox / "late.json").write_text(json.dumps({"kind": "answer", "target": 1, "text": "down"}))
    for name, age in (("answer.json", 20), ("late.json", 10)):  # settled, in this order
        os.utime(inbox / name, (time.time() - age, time.time() - age))
    session = open_session(root, session.model)  # type: ignore[arg-type]
    run_loop(session, lambda line: None, once=True)
    assert questions.get(session.db, 1).answer == "up"
    responses = [r[0] for r in session.db.execute("SELECT response FROM human_inputs ORDER BY id")]
    assert responses == [
        "answered question 1; its task resumes",
        "question 1 is answered; answer not used",
    ]
    assert on_milestone(root, "notes/a.txt") == "up"


def test_an_empty_question_is_an_error_result_not_a_suspension(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    seen: list[str] = []

    def answer(request: ModelRequest) -> Reply:
        if first_turn(request):
            return call("ask_human", question="   ")
        seen.append(results(request)[-1])
        return done("nothing")

    session = open_session(root, FunctionModel.by_agent({**_orient(), "executor": answer}))
    run_loop(session, lambda line: None, once=True)
    assert seen == ["ask_human: the question is empty"]
    assert open_questions(session.db) == []


def _orient() -> dict[str, Any]:
    from tests.plan_fakes import NOT_MET, VERIFIED, planning

    one = plan(task("a"))
    return {
        "verifier": lambda r: submit(VERIFIED),
        "assessor": lambda r: submit(NOT_MET),
        "planner": lambda r: submit(planning(one)),
    }


def test_while_a_question_is_open_the_planner_is_told_not_to_plan_its_task(
    tmp_path: Path,
) -> None:
    from tests.plan_fakes import planning, recording

    root = new_project(tmp_path)
    asked: list[str] = []
    planner = recording(lambda r: submit(planning(PLAN)), asked)
    model = fake_model(PLAN, executor=asking_executor([]), planner=planner)
    session = open_session(root, model)
    run_loop(session, lambda line: None, once=True)
    assert "Waiting For Answers" not in asked[0]
    session = open_session(root, model)
    run_loop(session, lambda line: None, once=True)
    assert "## Waiting For Answers" in asked[1]
    assert f"Trace task 2 (a), question 1: {QUESTION}" in asked[1]


def test_in_the_same_process_the_kept_work_tree_is_given_back_on_resume(tmp_path: Path) -> None:
    from soda.loop.run import run_iteration

    root = new_project(tmp_path)
    session = open_session(root, fake_model(PLAN, executor=asking_executor([])))
    run_iteration(session, lambda line: None)
    (branch,) = session.checkouts.kept()
    assert git(root, "branch", "--list", branch)
    answer = root / "state" / "inbox" / "answer.json"
    answer.write_text(json.dumps({"kind": "answer", "target": 1, "text": "up"}))
    os.utime(answer, (time.time() - 10, time.time() - 10))
    run_iteration(session, lambda line: None)
    assert session.checkouts.kept() == {}
    assert not git(root, "branch", "--list", branch)  # its branch went with it
    assert on_milestone(root, "notes/a.txt") == "up"


def test_an_orient_agent_asks_the_iteration_is_stuck_and_the_answer_reaches_orient(
    tmp_path: Path,
) -> None:
    from tests.plan_fakes import planning, recording

    seen: list[str] = []

    def planner(request: ModelRequest) -> Reply:
        if "## Answers From The Person" not in request.messages[0].text:
            return call("ask_human", question="Is rounding part of the spec?")
        return submit(planning(plan(task("a"))))

    model = fake_model(plan(task("a")), planner=recording(planner, seen))
    root = new_project(tmp_path)
    session = open_session(root, model)
    result = run_loop(session, lambda line: None, once=True)
    assert result.ending is Ending.STUCK
    assert "an ORIENT agent asked: Is rounding part of the spec?" in result.reason
    (asked,) = open_questions(session.db)
    assert (asked.agent, asked.task_key) == ("orient", None)
    assert soda("answer", str(asked.id), "no, truncate", cwd=root).returncode == 0

    session = open_session(root, model)
    assert run_loop(session, lambda line: None, once=True).ending is Ending.CONTINUE
    assert "Q1: Is rounding part of the spec?\n  A: no, truncate" in seen[-1]
    assert questions.get(session.db, asked.id).status == "resumed"
    assert on_milestone(root, "notes/a.txt") == "Task a"


def test_a_kept_conversation_keeps_its_cache_breaks_and_reads_an_older_one() -> None:
    text = "## Spec\n\nS\n\n## Claims\n\nL\n\n## Claims (continued)\n\nC"
    first = Message("user", text, cache_breaks=(11, 25))
    asked = Message("assistant", tool_calls=[ToolCall("toolu_1", "ask_human", {"question": "?"})])
    kept = conversation_json([first, asked], [], "toolu_1")

    def resumed(stored: dict[str, Any]) -> list[Message]:
        question = questions.Question(
            1,
            1,
            "a",
            None,
            "executor",
            "?",
            "answered",
            "yes",
            "toolu_1",
            json.dumps(stored),
            "now",
            "now",
        )
        found = resumed_conversation(question)
        assert found is not None
        return found

    assert resumed(kept)[0] == first
    # A conversation an older soda kept: one break, named stable_chars.
    older = {**kept, "messages": [dict(m) for m in kept["messages"]]}
    del older["messages"][0]["cache_breaks"]
    older["messages"][0]["stable_chars"] = 11
    assert resumed(older)[0].cache_breaks == (11,)
