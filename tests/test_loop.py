"""The loop end to end on real repositories, with the scripted model: DONE, STUCK,
HALT, a refused merge, and the demo through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from soda.config import load
from soda.loop.run import Ending, run_loop
from soda.loop.session import Session
from tests.conftest import git, soda
from tests.sample import sample_project
from tests.scripts import NOT_MET, VERIFIED, submit

ROOT = Path(__file__).resolve().parent.parent
DEMO_SCRIPT = json.loads((ROOT / "soda" / "demo" / "script.json").read_text())["responses"]


def project(tmp_path: Path, responses: list[dict[str, Any]]) -> Path:
    """The demo's sample project, with its own script of model responses."""
    return sample_project(tmp_path, responses=responses)


def run(root: Path, **kwargs: Any):
    lines: list[str] = []
    session = Session.open(load(root / "soda.toml"))
    result = run_loop(session, lines.append, **kwargs)
    return result, lines, session


def test_demo_script_runs_to_done(tmp_path: Path) -> None:
    root = project(tmp_path, DEMO_SCRIPT)
    result, lines, session = run(root)
    assert result.ending is Ending.DONE, lines
    rows = list(session.db["iterations"].rows)
    assert [(r["number"], r["decision"], r["outcome"]) for r in rows] == [
        (1, "CONTINUE", "merged"),
        (2, "DONE", "done"),
    ]
    merged = rows[0]["merged_commit"]
    assert git(root, "rev-parse", "soda/spec") == merged
    assert "Soda-Iteration: 1" in git(root, "log", "-1", "--format=%B", "soda/spec")
    # The user's checkout is untouched: still on main, calc.py without the new code.
    assert git(root, "branch", "--show-current") == "main"
    assert "def divide" not in (root / "calc.py").read_text()
    assert "def divide" in git(root, "show", "soda/spec:calc.py")
    assert not any((root / "state" / "worktrees").iterdir())
    tasks = {t.id: t.status for t in session.tracker.list()}
    assert tasks[2] == "closed"
    assert session.db.execute("SELECT status FROM runs").fetchone()[0] == "done"
    calls = session.db.execute("SELECT count(*) FROM agent_calls").fetchone()[0]
    assert calls == len(DEMO_SCRIPT)


def test_contract_violation_halts_with_the_path(tmp_path: Path) -> None:
    bad = submit(
        "verifier",
        {"checks": [], "task_updates": [], "learnings": [], "summary": 42, "learning_verdicts": []},
    )
    root = project(tmp_path, [bad, bad])  # the first goes back to the model; a repeat halts
    result, _, session = run(root)
    assert result.ending is Ending.HALT
    halt = next(iter(session.db["halts"].rows))
    assert halt["agent"] == "verifier"
    assert halt["violation_path"] == "$.summary"
    assert halt["violation_rule"] == "type"
    assert json.loads(halt["raw_output"])["summary"] == 42
    iteration = next(iter(session.db["iterations"].rows))
    assert (iteration["decision"], iteration["outcome"]) == ("HALT", "halted")
    assert iteration["ended_at"] is not None


def test_no_actionable_work_is_stuck_with_the_reason(tmp_path: Path) -> None:
    planner = submit(
        "planner",
        {
            "actionable_work_exists": False,
            "new_tasks": [],
            "iteration_plan": None,
            "stuck_reason": "Which rounding mode should divide use? Tell me with soda tell.",
            "learnings": [],
        },
    )
    root = project(tmp_path, [VERIFIED, NOT_MET, planner])
    result, _, _ = run(root)
    assert result.ending is Ending.STUCK
    assert "rounding mode" in result.reason


def plan_with(task: dict[str, Any]) -> dict[str, Any]:
    return submit(
        "planner",
        {
            "actionable_work_exists": True,
            "new_tasks": [],
            "stuck_reason": None,
            "learnings": [],
            "iteration_plan": {"intent": "break things", "approach": "-", "tasks": [task]},
        },
    )


TASK = {
    "id": "a",
    "task_id": None,
    "title": "Rewrite add",
    "description": "-",
    "depends_on": [],
    "risk": "low",
    "tool_hints": [],
}


def test_regression_is_not_merged(tmp_path: Path) -> None:
    breaks_add = {
        "agent": "executor",
        "tool_calls": [
            {
                "name": "edit_file",
                "input": {"path": "calc.py", "old": "return a + b", "new": "return a - b"},
            }
        ],
    }
    done = submit(
        "executor",
        {
            "tasks_blocked": [],
            "task_comments": [],
            "new_subtasks": [],
            "learnings": [],
            "summary": "rewrote add",
        },
    )
    root = project(tmp_path, [VERIFIED, NOT_MET, plan_with(TASK), breaks_add, done])
    before = git(root, "rev-parse", "main")  # the milestone branch starts here
    result, _, session = run(root, once=True)
    assert result.ending is Ending.CONTINUE
    row = next(iter(session.db["iterations"].rows))
    assert row["outcome"] == "gate_failed"
    assert "test_add" in json.loads(row["act_json"])["detail"]
    assert git(root, "rev-parse", "soda/spec") == before
    assert session.tracker.show(2).status == "open"
    assert not any((root / "state" / "worktrees").iterdir())


def test_executor_refused_outside_the_worktree_halts_the_replay(tmp_path: Path) -> None:
    escape = {
        "agent": "executor",
        "tool_calls": [
            {"name": "write_file", "input": {"path": "../../outside.txt", "content": "x"}}
        ],
    }
    root = project(tmp_path, [VERIFIED, NOT_MET, plan_with(TASK), escape, escape])
    result, _, _ = run(root)
    assert result.ending is Ending.HALT
    assert "refused" in result.reason
    assert not (tmp_path / "outside.txt").exists()
    assert not (root / "state" / "outside.txt").exists()


@pytest.mark.slow
def test_soda_demo_cli(tmp_path: Path) -> None:
    target = tmp_path / "demo"
    result = soda("demo", "--dir", str(target), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SCRIPTED" in result.stdout
    assert "DONE" in result.stdout
    import sqlite3

    db = sqlite3.connect(target / "state" / "soda.db")
    decisions = [r[0] for r in db.execute("SELECT decision FROM iterations ORDER BY number")]
    assert decisions == ["CONTINUE", "DONE"]
    assert "Soda-Iteration: 1" in git(target, "log", "-1", "--format=%B", "soda/spec")
    # The sample project's tests pass at the milestone head.
    checkout = tmp_path / "check"
    git(target, "worktree", "add", "-q", str(checkout), "soda/spec")
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert tests.returncode == 0, tests.stdout
    history = soda("history", cwd=target)
    assert history.returncode == 0
    assert "CONTINUE" in history.stdout and "DONE" in history.stdout
    show = soda("show", "1", cwd=target)
    assert "merged" in show.stdout and "AGENT CALLS" in show.stdout


def test_on_done_merge_fast_forwards_the_base_branch(tmp_path: Path) -> None:
    root = project(tmp_path, DEMO_SCRIPT)
    config = root / "soda.toml"
    config.write_text(config.read_text().replace('on_done = "leave"', 'on_done = "merge"'))
    git(root, "commit", "-q", "-am", "merge at done")
    result, lines, _ = run(root)
    assert result.ending is Ending.DONE
    assert git(root, "rev-parse", "main") == git(root, "rev-parse", "soda/spec")
    assert "def divide" in (root / "calc.py").read_text()  # clean checkout on main moved along
    assert any("fast-forwarded main" in line for line in lines)


def test_on_done_leave_keeps_the_base_branch(tmp_path: Path) -> None:
    root = project(tmp_path, DEMO_SCRIPT)
    before = git(root, "rev-parse", "main")
    result, _, _ = run(root)
    assert result.ending is Ending.DONE
    assert git(root, "rev-parse", "main") == before


def test_single_orient_pattern_uses_one_agent(tmp_path: Path) -> None:
    orienter = submit(
        "orienter",
        {
            "spec_satisfied": True,
            "actionable_work_exists": False,
            "confidence": "medium",
            "summary": "already met",
            "task_updates": [],
            "new_tasks": [],
            "gaps": [],
            "iteration_plan": None,
            "stuck_reason": None,
            "learnings": ["the suite runs in under a second"],
            "learning_verdicts": [],
        },
    )
    root = project(tmp_path, [orienter])
    # DONE is confirmed by a test run: make the spec truly met (no failing test,
    # and no criterion naming a test that is gone).
    git(root, "rm", "-q", "tests/test_acceptance.py")
    (root / "specs" / "SPEC.md").write_text("# Calculator\n\n## Acceptance criteria\n\n- add\n")
    git(root, "commit", "-q", "-am", "drop the acceptance tests")
    config = root / "soda.toml"
    config.write_text(
        config.read_text().replace('orient_pattern = "split"', 'orient_pattern = "single"')
    )
    result, _, session = run(root)
    assert result.ending is Ending.DONE
    agents = [r[0] for r in session.db.execute("SELECT agent FROM agent_calls")]
    assert agents == ["orienter"]
    learned = [r[0] for r in session.db.execute("SELECT text FROM learnings")]
    assert learned == ["the suite runs in under a second"]


def test_human_input_reaches_orient_and_is_marked_applied(tmp_path: Path) -> None:
    from soda.contracts import HumanInput
    from soda.human.write import write_input

    root = project(
        tmp_path,
        [
            VERIFIED,
            NOT_MET,
            submit(
                "planner",
                {
                    "actionable_work_exists": False,
                    "new_tasks": [],
                    "iteration_plan": None,
                    "stuck_reason": "waiting for the person",
                    "learnings": [],
                },
            ),
        ],
    )
    write_input(root / "state", HumanInput(kind="correction", text="use integer division"))
    session = Session.open(load(root / "soda.toml"))
    run_loop(session, lambda line: None)
    first_request = session.model.requests[0]  # type: ignore[attr-defined]
    assert "use integer division" in first_request.messages[0].text
    row = session.db.execute(
        "SELECT status, applied_iteration, response FROM human_inputs"
    ).fetchone()
    assert row[0] == "applied" and row[1] == 1
    assert "ORIENT" in row[2]


def test_spec_change_and_overrides_are_applied_at_sense(tmp_path: Path) -> None:
    from soda.contracts import HumanInput
    from soda.human.write import write_input

    planner = submit(
        "planner",
        {
            "actionable_work_exists": False,
            "new_tasks": [],
            "iteration_plan": None,
            "stuck_reason": "-",
            "learnings": [],
        },
    )
    root = project(tmp_path, [VERIFIED, NOT_MET, planner])
    session = Session.open(load(root / "soda.toml"))
    extra = session.tracker.create("Write docs", parent_id=session.milestone.root_task_id)
    state = root / "state"
    write_input(state, HumanInput(kind="spec_change", text="- [ ] `calc.power(a, b)` exists."))
    write_input(state, HumanInput(kind="override", action="skip", task_id=extra.id))
    write_input(state, HumanInput(kind="override", action="constraint", text="no numpy"))
    lines: list[str] = []
    run_loop(session, lines.append)
    spec = (root / "specs" / "SPEC.md").read_text()
    assert spec.rstrip().endswith("- [ ] `calc.power(a, b)` exists.")
    assert "# Calculator" in spec  # amended, not replaced
    assert "calc.power" in session.model.requests[0].messages[0].text  # type: ignore[attr-defined]
    assert session.tracker.show(extra.id).status == "blocked"
    learned = [r[0] for r in session.db.execute("SELECT text FROM learnings")]
    assert "Constraint from a person: no numpy" in learned
    responses = dict(
        session.db.execute(
            "SELECT kind, response FROM human_inputs"
            " WHERE kind != 'override' OR response LIKE 'task%'"
        )
    )
    assert responses["spec_change"] == "spec amended in SPEC.md"
    assert any(line.startswith("human: task #") for line in lines)


def test_cancel_skips_the_pending_tasks_of_the_running_plan(tmp_path: Path) -> None:
    from soda.contracts import HumanInput
    from soda.human.write import write_input

    two_tasks = plan_with(TASK)
    second = {**TASK, "id": "b", "title": "Second", "depends_on": []}
    two_tasks["tool_calls"][0]["input"]["iteration_plan"]["tasks"].append(second)
    root = project(tmp_path, [VERIFIED, NOT_MET, two_tasks])
    # The person cancels before the executor starts: both tasks are skipped.
    write_input(root / "state", HumanInput(kind="cancel"))
    result, _, session = run(root, once=True)
    row = session.db.execute("SELECT act_json FROM iterations").fetchone()[0]
    statuses = [t["status"] for t in json.loads(row)["tasks"]]
    assert statuses == ["skipped", "skipped"]
    assert result.ending is Ending.CONTINUE
    assert session.db.execute("SELECT status FROM human_inputs").fetchone()[0] == "applied"
