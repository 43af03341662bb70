"""A confused model costs little: every iteration makes progress, or the run ends
STUCK by soda's own decision with a reason that names the pattern. On the demo's
real project (real git, the real gate running its real tests), with the
repository's defaults and a $0 model that (a) claims DONE while the acceptance
tests fail, (b) writes the same wrong change, (c) changes nothing, (d) gives up;
`--max-iterations N` starts exactly N; a person's word resets the count; and a
daemon does not burn again at its next wake."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from soda.cli.demo import SCRIPT_PATH
from soda.contracts import HumanInput
from soda.contracts.outcomes import RunStatus
from soda.daemon.process import Daemon
from soda.human.write import write_input
from soda.llm.base import ModelRequest
from soda.llm.function import FunctionModel, Reply, call, first_turn, submit
from soda.loop.run import Ending, run_loop
from soda.loop.session import Session
from soda.system.lock import release_lock
from tests.conftest import git, soda
from tests.plan_fakes import NOT_MET, VERIFIED, done, new_project, open_session, plan, planning

SATISFIED = {"spec_satisfied": True, "confidence": "high", "gaps": [], "summary": "all done"}
WRONG_CALC = (
    "def add(a, b):\n    return a + b\n\n\n"
    "def subtract(a, b):\n    return a + b\n\n\n"
    "def divide(a, b):\n    return a * b\n"
)
ACCEPTANCE = {
    "id": "calc",
    "task_id": None,
    "title": "Add subtract and divide to calc",
    "description": "calc.subtract and calc.divide, as the spec says",
    "depends_on": [],
    "risk": "low",
    "tool_hints": [],
}


def model(executor: Any, assessor: dict[str, Any] = NOT_MET) -> FunctionModel:
    the_plan = plan(ACCEPTANCE, intent="Add subtract and divide")
    return FunctionModel.by_agent(
        {
            "verifier": lambda request: submit(VERIFIED),
            "assessor": lambda request: submit(assessor),
            "planner": lambda request: submit(planning(the_plan)),
            "executor": executor,
        }
    )


def wrong_change(request: ModelRequest) -> Reply:
    if first_turn(request):
        return call("write_file", path="calc.py", content=WRONG_CALC)
    return done("subtract and divide added")


def no_change(request: ModelRequest) -> Reply:
    return done("nothing needed changing")


def gives_up(request: ModelRequest) -> Reply:
    return call("cannot_complete", reason="I do not know how to divide")


def rows(session: Session) -> list[tuple[Any, ...]]:
    return [
        (r["number"], r["decision"], r["outcome"], r["progress"])
        for r in session.db["iterations"].rows_where(order_by="number")
    ]


def run(root: Path, fake: FunctionModel, **kwargs: Any) -> tuple[Any, Session, list[str]]:
    lines: list[str] = []
    session = open_session(root, fake)
    return run_loop(session, lines.append, **kwargs), session, lines


def assert_stalled(session: Session, result: Any, outcome: str) -> None:
    assert result.ending is Ending.STUCK, result
    assert rows(session) == [
        (1, "CONTINUE", outcome, "none"),
        (2, "CONTINUE", outcome, "none"),
        (3, "STUCK", outcome, "none"),
    ]
    assert "no progress in 3 iterations in a row (1, 2, 3)" in result.reason
    assert "soda tell" in result.reason and "max_stalled_iterations (now 3)" in result.reason
    [(status, reason)] = session.db.execute("SELECT status, final_reason FROM runs").fetchall()
    assert (status, reason) == (RunStatus.STUCK, result.reason)


def test_a_false_done_on_failing_tests_ends_stuck(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    tip = git(root, "rev-parse", "main")
    result, session, _ = run(root, model(no_change, assessor=SATISFIED))
    assert_stalled(session, result, "done_refused")
    assert "the model said the spec is met each time, and the tests refused it" in result.reason
    assert "tests.test_acceptance::test_divide" in result.reason  # the refusal, quoted
    assert git(root, "rev-parse", "soda/spec") == tip  # nothing landed

    again = run_loop(session_again := reopen(session), lambda line: None)
    assert again.ending is Ending.STUCK  # a new run does not reset the count
    assert [row[:2] for row in rows(session_again)][3:] == [(4, "STUCK")]
    assert "no progress in 3 iterations in a row (2, 3, 4)" in again.reason


def reopen(session: Session) -> Session:
    """The same project and model in a new session (a person runs soda again)."""
    session.finish_run(RunStatus.STUCK, "ended")
    release_lock(session.config.state_dir)
    session.db.conn.close()
    return Session.open(session.live, model=session.model)


def test_the_same_wrong_change_ends_stuck(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    result, session, _ = run(root, model(wrong_change))
    assert result.ending is Ending.STUCK, result
    assert len(rows(session)) <= 6
    assert "no progress in 3 iterations in a row" in result.reason


def test_an_executor_that_changes_nothing_ends_stuck(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    result, session, _ = run(root, model(no_change))
    assert_stalled(session, result, "no_changes")
    assert 'the executor changed nothing on task 2 "Add subtract and divide to calc"' in (
        result.reason
    )


def test_an_executor_that_gives_up_ends_stuck(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    result, session, _ = run(root, model(gives_up))
    assert_stalled(session, result, "nothing_completed")
    assert (
        'the executor gave up on tasks 2, 3, 4 "Add subtract and divide to calc"' in result.reason
    )
    assert "I do not know how to divide" in result.reason


def test_a_persons_input_is_progress(tmp_path: Path) -> None:
    """A correction read by ORIENT counts; the stall is counted again after it."""
    root = new_project(tmp_path)
    fake = model(no_change)
    session = open_session(root, fake)
    lines: list[str] = []
    write_input(session.config.state_dir, HumanInput(kind="correction", text="try smaller"))
    result = run_loop(session, lines.append)
    assert result.ending is Ending.STUCK
    assert [row[3] for row in rows(session)] == ["a person's input", "none", "none", "none"]


def test_max_iterations_starts_exactly_that_many(tmp_path: Path) -> None:
    """Each iteration lands a new note (progress), the spec is never met: the run
    stops after exactly 2 iterations started, the second recording why."""
    counter = iter(range(1000))

    def new_note(request: ModelRequest) -> Reply:
        if first_turn(request):
            return call("write_file", path=f"notes/{next(counter)}.txt", content="more")
        return done("a note")

    root = new_project(tmp_path)
    session = open_session(root, model(new_note))
    session.max_iterations = 2
    result = run_loop(session, lambda line: None)
    assert result.ending is Ending.STUCK
    assert rows(session) == [(1, "CONTINUE", "merged", "merged"), (2, "STUCK", "merged", "merged")]
    assert "reached max iterations (2)" in result.reason


def test_soda_run_max_iterations_1_runs_one(tmp_path: Path) -> None:
    """The demo's script merges in iteration 1 and would find DONE in 2: with
    `--max-iterations 1` only iteration 1 starts (the real CLI)."""
    root = new_project(tmp_path)
    done_ = soda("run", "--max-iterations", "1", "--json", cwd=root)
    assert done_.returncode == 3, done_.stderr
    summary = json.loads(done_.stdout)
    assert (summary["ending"], summary["iteration"]) == ("stuck", 1)
    assert "reached max iterations (1)" in summary["reason"]
    shown = soda("show", "1", cwd=root).stdout
    assert "decision: STUCK: reached max iterations (1)" in shown
    assert "progress: merged" in shown


def false_done_script(iterations: int) -> list[dict[str, Any]]:
    """`iterations` iterations of a model that says the spec is met."""
    one = [
        {"agent": "verifier", "tool_calls": [{"name": "submit", "input": VERIFIED}]},
        {"agent": "assessor", "tool_calls": [{"name": "submit", "input": SATISFIED}]},
    ]
    return one * iterations


def test_the_daemon_does_not_burn_again_after_a_stall(tmp_path: Path) -> None:
    """A daemon stalled by a false DONE is idle: more wakes, even a new daemon on
    the same state, make no iteration and no model call until a person writes.
    The script holds exactly three iterations: a fourth would HALT on its end."""
    root = new_project(tmp_path)
    (root / SCRIPT_PATH).write_text(json.dumps({"responses": false_done_script(3)}))
    config_path = root / "soda.toml"

    daemon = Daemon(config_path)
    session = daemon._preflight()
    try:
        for _ in range(6):
            daemon._tick(session)
        assert [row[1:3] for row in rows(session)] == [
            ("CONTINUE", "done_refused"),
            ("CONTINUE", "done_refused"),
            ("STUCK", "done_refused"),
        ]
        assert daemon.idle
        calls = session.db.execute("SELECT count(*) FROM agent_calls").fetchone()[0]
    finally:
        session.finish_run(RunStatus.STOPPED, "test over")
        release_lock(daemon.config.state_dir)
        session.db.conn.close()

    again = Daemon(config_path)  # restarted: its first wake is free
    session = again._preflight()
    try:
        again._tick(session)
        assert len(rows(session)) == 3
        assert session.db.execute("SELECT count(*) FROM agent_calls").fetchone()[0] == calls
        kinds = [r["kind"] for r in session.db["events"].rows_where("kind = 'wake.skipped'")]
        assert kinds == ["wake.skipped"]
    finally:
        session.finish_run(RunStatus.STOPPED, "test over")
        release_lock(again.config.state_dir)
        session.db.conn.close()
