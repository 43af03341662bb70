"""Plan validation and bounded repair through the real loop, with the scripted
model: an invalid plan goes back to its agent with the problems (unknown
dependencies, unknown Trace tasks, cycles, more than `[plan] max_tasks` tasks),
at most PLAN_REPAIRS rounds, then the iteration HALTs with the last problems
recorded in `halts`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from soda.loop.orient import PLAN_REPAIRS
from soda.loop.run import Ending
from tests.conftest import git
from tests.scripts import NOT_MET, VERIFIED, submit
from tests.test_loop import DEMO_SCRIPT, project, run

DEMO_PLANNER = DEMO_SCRIPT[4]
DEMO_EXECUTOR = DEMO_SCRIPT[5:10]
PLAN = DEMO_PLANNER["tool_calls"][0]["input"]["iteration_plan"]
assert DEMO_PLANNER["agent"] == "planner" and DEMO_EXECUTOR[-1]["agent"] == "executor"


def task(key: str, *deps: str, task_id: int | None = None) -> dict[str, Any]:
    return {
        "id": key,
        "task_id": task_id,
        "title": f"task {key}",
        "description": "-",
        "depends_on": list(deps),
        "risk": "low",
        "tool_hints": [],
    }


def planner(*tasks: dict[str, Any]) -> dict[str, Any]:
    return submit(
        "planner",
        {
            "actionable_work_exists": True,
            "new_tasks": [],
            "stuck_reason": None,
            "learnings": [],
            "iteration_plan": {"intent": "bad plan", "approach": "-", "tasks": list(tasks)},
        },
    )


def orienter(plan: dict[str, Any]) -> dict[str, Any]:
    return submit(
        "orienter",
        {
            "spec_satisfied": False,
            "actionable_work_exists": True,
            "confidence": "high",
            "summary": "subtract and divide are missing",
            "task_updates": [],
            "new_tasks": [],
            "gaps": [],
            "iteration_plan": plan,
            "stuck_reason": None,
            "learnings": [],
            "learning_verdicts": [],
        },
    )


def prompts(session: Any, agent: str) -> list[str]:
    """The first user message of each run of `agent` (its rendered inputs)."""
    return [
        r.messages[0].text
        for r in session.model.requests
        if r.agent == agent and len(r.messages) == 1
    ]


def set_config(root: Path, old: str, new: str) -> None:
    config = root / "soda.toml"
    text = config.read_text()
    assert old in text
    config.write_text(text.replace(old, new))
    git(root, "commit", "-q", "-am", "configure")


def halt_row(session: Any) -> dict[str, Any]:
    rows = list(session.db["halts"].rows)
    assert len(rows) == 1
    return rows[0]


def test_unknown_dependency_goes_back_to_the_planner_and_the_repaired_plan_runs(
    tmp_path: Path,
) -> None:
    bad = planner(task("a", "zz"))
    root = project(tmp_path, [VERIFIED, NOT_MET, bad, DEMO_PLANNER, *DEMO_EXECUTOR])
    result, lines, session = run(root, once=True)
    assert result.ending is Ending.CONTINUE, lines
    row = next(iter(session.db["iterations"].rows))
    assert (row["decision"], row["outcome"]) == ("CONTINUE", "merged")
    assert json.loads(row["orient_json"])["iteration_plan"]["intent"] == PLAN["intent"]
    first, second = prompts(session, "planner")
    assert "Rejected Plan Problems" not in first
    assert "## Rejected Plan Problems" in second
    assert "task 'a' depends on unknown keys ['zz']" in second
    rejected = [
        json.loads(r[0])
        for r in session.db.execute("SELECT data_json FROM events WHERE kind = 'plan.rejected'")
    ]
    assert rejected == [{"attempt": 1, "problems": ["task 'a' depends on unknown keys ['zz']"]}]
    assert not list(session.db["halts"].rows)


def test_a_cycle_is_reported_to_the_planner(tmp_path: Path) -> None:
    cycle = planner(task("a", "b"), task("b", "a"))
    root = project(tmp_path, [VERIFIED, NOT_MET, cycle, DEMO_PLANNER, *DEMO_EXECUTOR])
    result, lines, session = run(root, once=True)
    assert result.ending is Ending.CONTINUE, lines
    second = prompts(session, "planner")[1]
    assert "plan has a dependency cycle among ['a', 'b']" in second


def test_an_invalid_plan_three_times_halts_with_the_last_problems(tmp_path: Path) -> None:
    attempts = [
        planner(task("a", "zz")),
        planner(task("a", task_id=99)),
        planner(task("a", "b"), task("b", "a")),
    ]
    assert len(attempts) == PLAN_REPAIRS
    root = project(tmp_path, [VERIFIED, NOT_MET, *attempts])
    result, lines, session = run(root)
    assert result.ending is Ending.HALT, lines
    assert "planner produced an invalid plan 3 times" in result.reason
    halt = halt_row(session)
    assert halt["error_type"] == "StructuralError"
    assert "last problems: plan has a dependency cycle among ['a', 'b']" in halt["message"]
    assert "zz" not in halt["message"]  # the last round's problems, not the first's
    iteration = next(iter(session.db["iterations"].rows))
    assert (iteration["decision"], iteration["outcome"]) == ("HALT", "halted")
    # Each repair round saw the problems of the round before it.
    _, second, third = prompts(session, "planner")
    assert "unknown keys ['zz']" in second
    assert "names Trace task 99, which does not exist" in third


def test_more_than_max_tasks_is_refused_naming_the_limit(tmp_path: Path) -> None:
    too_many = planner(task("a"), task("b"), task("c"))
    root = project(tmp_path, [VERIFIED, NOT_MET, too_many, too_many, too_many])
    set_config(root, "max_tasks = 8", "max_tasks = 2")
    result, lines, session = run(root)
    assert result.ending is Ending.HALT, lines
    assert (
        "plan has 3 tasks, more than the limit of 2 ([plan] max_tasks)"
        in (halt_row(session)["message"])
    )
    assert len(prompts(session, "planner")) == PLAN_REPAIRS


def test_single_pattern_repairs_the_orienters_plan(tmp_path: Path) -> None:
    bad = {**PLAN, "tasks": [{**PLAN["tasks"][0], "depends_on": ["ghost"]}]}
    root = project(tmp_path, [orienter(bad), orienter(PLAN), *DEMO_EXECUTOR])
    set_config(root, 'orient_pattern = "split"', 'orient_pattern = "single"')
    result, lines, session = run(root, once=True)
    assert result.ending is Ending.CONTINUE, lines
    row = next(iter(session.db["iterations"].rows))
    assert row["outcome"] == "merged"
    second = prompts(session, "orienter")[1]
    assert "task 'a' depends on unknown keys ['ghost']" in second


def test_single_pattern_halts_after_three_invalid_plans(tmp_path: Path) -> None:
    bad = {**PLAN, "tasks": [{**PLAN["tasks"][0], "depends_on": ["ghost"]}]}
    root = project(tmp_path, [orienter(bad)] * PLAN_REPAIRS)
    set_config(root, 'orient_pattern = "split"', 'orient_pattern = "single"')
    result, lines, session = run(root)
    assert result.ending is Ending.HALT, lines
    message = halt_row(session)["message"]
    assert "orienter produced an invalid plan 3 times" in message
    assert "unknown keys ['ghost']" in message
