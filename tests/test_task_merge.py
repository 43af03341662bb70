"""A new task titled like an open one under the same parent is merged into it
(a comment with the new description, no second row), whichever path creates it:
Trace itself, ORIENT's new tasks and plan tasks, the executor's new subtasks.
Real git, real SQLite, the real jail; the model is a FunctionModel."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from soda.cli.demo import prepare
from soda.config import load
from soda.llm.base import ModelRequest
from soda.llm.function import FunctionModel, submit
from soda.loop.run import run_iteration
from soda.loop.session import Session
from soda.store import open_db
from soda.trace import SqliteTracker, same_title


@pytest.fixture
def tracker(tmp_path: Path) -> SqliteTracker:
    trace = SqliteTracker(open_db(tmp_path / "soda.db"), "m1")
    trace.create("The spec")
    return trace


def test_titles_are_the_same_after_case_punctuation_and_spaces() -> None:
    assert same_title("Add  divide()!") == same_title("add DIVIDE") == "add divide"
    assert same_title("Add divide") != same_title("Add subtract")


def test_a_twin_under_the_same_parent_is_merged_with_a_comment(tracker: SqliteTracker) -> None:
    first = tracker.create("Add divide()", "divide with a test", parent_id=1)
    again = tracker.create("  add DIVIDE ", "raise on zero too", parent_id=1, author="planner")
    assert again.id == first.id
    assert [t.id for t in tracker.list()] == [1, first.id]
    [comment] = tracker.comments(first.id)
    assert comment.author == "planner"
    assert "raise on zero too" in comment.body
    assert tracker.show(first.id).description == "divide with a test"


def test_other_parents_closed_and_blocked_tasks_are_not_merged(tracker: SqliteTracker) -> None:
    parent = tracker.create("Calculator", parent_id=1)
    under_root = tracker.create("Add divide", parent_id=1)
    under_other = tracker.create("Add divide", parent_id=parent.id)
    assert under_other.id != under_root.id
    tracker.close(under_root.id, "done")
    tracker.block(under_other.id, "needs a decision")
    fresh = tracker.create("add divide", parent_id=1)
    assert fresh.id not in (under_root.id, under_other.id)
    assert tracker.create("Add divide", parent_id=parent.id).id not in (under_other.id, fresh.id)
    assert all(not tracker.comments(t.id) for t in tracker.list())


def test_threads_creating_the_same_task_make_one_row(tracker: SqliteTracker) -> None:
    """ACT's parallel tasks share one connection: the check and the insert are one step."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        made = list(pool.map(lambda n: tracker.create("Add divide", f"from {n}", 1), range(8)))
    assert len({task.id for task in made}) == 1
    assert len(tracker.list()) == 2  # the root and one task
    assert len(tracker.comments(made[0].id)) == 7


# --- through the loop: ORIENT's tasks and the executor's subtasks ---------------


def test_planner_and_executor_tasks_merge_into_open_ones(tmp_path: Path) -> None:
    session = Session.open(load(prepare(tmp_path / "project")), FunctionModel(answer))
    tracker = session.tracker
    root = session.milestone.root_task_id
    subtract = tracker.create("Add subtract", "calc.subtract(a, b)", parent_id=root)
    test = tracker.create("Test subtract", "a test for subtract", parent_id=subtract.id)
    before = [t.id for t in tracker.list()]

    run_iteration(session, lambda line: None)

    assert [t.id for t in tracker.list()] == before  # no second row anywhere
    orient_notes = [c.body for c in tracker.comments(subtract.id) if c.author == "orient"]
    assert any("also negative numbers" in body for body in orient_notes)  # new_tasks
    assert any("the plan's description" in body for body in orient_notes)  # plan task
    executor_notes = [c.body for c in tracker.comments(test.id)]
    assert any("a test with negative numbers" in body for body in executor_notes)
    orientation = json.loads(session.db.execute("SELECT orient_json FROM iterations").fetchone()[0])
    [planned] = orientation["iteration_plan"]["tasks"]
    assert planned["task_id"] == subtract.id  # the plan task was bound to the open task


def answer(request: ModelRequest) -> dict[str, Any]:
    if request.agent == "verifier":
        return submit(
            {
                "checks": [],
                "task_updates": [],
                "learnings": [],
                "summary": "s",
                "learning_verdicts": [],
            }
        )
    if request.agent == "assessor":
        return submit({"spec_satisfied": False, "confidence": "high", "gaps": [], "summary": "s"})
    if request.agent == "planner":
        return submit(planning())
    if request.agent == "executor":
        return submit(
            {
                "tasks_blocked": [],
                "task_comments": [],
                "new_subtasks": [
                    {"title": "test subtract.", "description": "a test with negative numbers",
                     "parent_id": 2}
                ],
                "learnings": [],
                "summary": "nothing changed",
            }
        )  # fmt: skip
    raise AssertionError(f"unexpected agent {request.agent}")


def planning() -> dict[str, Any]:
    task = {
        "id": "a",
        "task_id": None,
        "title": "ADD SUBTRACT",
        "description": "the plan's description",
        "depends_on": [],
        "risk": "low",
        "tool_hints": [],
    }
    return {
        "actionable_work_exists": True,
        "new_tasks": [
            {
                "title": "add subtract!",
                "description": "also negative numbers",
                "risk": "low",
            }
        ],
        "iteration_plan": {"intent": "subtract", "approach": "-", "tasks": [task]},
        "stuck_reason": None,
        "learnings": [],
    }
