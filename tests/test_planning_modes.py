"""Planning modes ([loop] planning) through the real SENSE and ORIENT, with the
behavioural fake model: always keeps the planner's DAG, never tells the planner
to plan one task and cuts its plan to one, auto decides by the work at hand,
model asks the fast model and falls back to the heuristic when that fails."""

from __future__ import annotations

from pathlib import Path

from soda.contracts import Orientation
from soda.llm.function import submit
from soda.loop.phases import orient_phase, sense_phase
from soda.loop.session import Session
from tests.conftest import git
from tests.plan_fakes import (
    events,
    fake_model,
    new_project,
    open_session,
    plan,
    planning,
    recording,
    task,
)

DAG = plan(task("a", title="Add divide"), task("b", "a", title="Tests for divide"), task("c"))


def orient_once(session: Session) -> Orientation:
    it = session.begin_iteration()
    claims = sense_phase(session, it, lambda line: None)
    return orient_phase(session, it, claims)


def keys(orientation: Orientation) -> list[str]:
    assert orientation.iteration_plan is not None
    return [t.id for t in orientation.iteration_plan.tasks]


def mode(tmp_path: Path, value: str) -> Path:
    return new_project(tmp_path, {'planning = "auto"': f'planning = "{value}"'})


def test_always_keeps_the_planners_dag(tmp_path: Path) -> None:
    asked: list[str] = []
    model = fake_model(DAG, planner=recording(lambda r: submit(planning(DAG)), asked))
    session = open_session(mode(tmp_path, "always"), model)
    orientation = orient_once(session)
    assert keys(orientation) == ["a", "b", "c"]
    assert "Plan Size" not in asked[0]
    assert events(session, "planning.mode") == [
        {"mode": "always", "multi_task": True, "reason": "planning = always"}
    ]
    assert events(session, "planning.cut") == []


def test_never_tells_the_planner_and_cuts_the_plan_to_one_task(tmp_path: Path) -> None:
    asked: list[str] = []
    model = fake_model(DAG, planner=recording(lambda r: submit(planning(DAG)), asked))
    session = open_session(mode(tmp_path, "never"), model)
    orientation = orient_once(session)
    assert keys(orientation) == ["a"]
    assert orientation.iteration_plan is not None
    assert orientation.iteration_plan.tasks[0].depends_on == []
    assert "## Plan Size" in asked[0] and "exactly ONE task" in asked[0]
    assert events(session, "planning.cut") == [{"kept": "a", "dropped": ["b", "c"]}]
    # The cut plan is the one bound to Trace: only task a became a Trace task.
    titles = [t.title for t in session.tracker.list()]
    assert "Add divide" in titles and "Tests for divide" not in titles


def test_never_keeps_the_first_task_without_dependencies(tmp_path: Path) -> None:
    reordered = plan(task("b", "a"), task("a", title="Add divide"))
    session = open_session(mode(tmp_path, "never"), fake_model(reordered))
    assert keys(orient_once(session)) == ["a"]


def test_auto_plans_several_tasks_for_a_spec_with_several_open_items(tmp_path: Path) -> None:
    # The demo spec has four unchecked acceptance criteria.
    session = open_session(mode(tmp_path, "auto"), fake_model(DAG))
    assert keys(orient_once(session)) == ["a", "b", "c"]
    (choice,) = events(session, "planning.mode")
    assert choice["multi_task"] is True and "4 spec items" in choice["reason"]


def test_auto_plans_one_task_for_a_single_open_item(tmp_path: Path) -> None:
    root = mode(tmp_path, "auto")
    spec = root / "specs" / "SPEC.md"
    spec.write_text("# Divide\n\n- [x] add\n- [ ] `calc.divide(a, b)` returns `a / b`.\n")
    git(root, "commit", "-q", "-am", "one item left")
    session = open_session(root, fake_model(DAG))
    assert keys(orient_once(session)) == ["a"]
    (choice,) = events(session, "planning.mode")
    assert choice == {
        "mode": "auto",
        "multi_task": False,
        "reason": "0 open tasks, 1 spec items: one task is enough",
    }


def test_model_mode_follows_the_fast_model(tmp_path: Path) -> None:
    decided: list[str] = []
    decider = recording(lambda r: submit({"multi_task": False, "reason": "one small fix"}), decided)
    session = open_session(mode(tmp_path, "model"), fake_model(DAG, planning_mode=decider))
    assert keys(orient_once(session)) == ["a"]
    assert events(session, "planning.mode") == [
        {"mode": "model", "multi_task": False, "reason": "one small fix"}
    ]
    assert "## Work" in decided[0] and "Calculator" in decided[0]
    calls = session.db.execute(
        "SELECT model FROM agent_calls WHERE agent = 'planning_mode'"
    ).fetchall()
    assert calls == [(session.config.model.fast,)]


def test_model_mode_falls_back_to_the_heuristic_on_a_broken_answer(tmp_path: Path) -> None:
    broken = fake_model(DAG, planning_mode=lambda r: submit({"multi_task": "maybe"}))
    session = open_session(mode(tmp_path, "model"), broken)
    assert keys(orient_once(session)) == ["a", "b", "c"]  # 4 spec items: the heuristic plans
    (fallback,) = events(session, "planning.fallback")
    assert fallback["error"] == "ContractViolation"
    (choice,) = events(session, "planning.mode")
    assert choice["multi_task"] is True
    assert choice["reason"].startswith("heuristic after ContractViolation")
    assert not list(session.db["halts"].rows)
