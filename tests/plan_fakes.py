"""A behavioural fake model for the plan tests (planning modes, plan-only, edits
before approval, questions): ORIENT's agents answer from fixed findings, the
planner proposes the plan a test gives it, and the executor writes
`notes/<task key>.txt` holding the task's title, then submits."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from soda.config import load
from soda.llm.base import ModelRequest
from soda.llm.function import FunctionModel, Reply, call, first_turn, submit
from soda.loop.session import Session
from tests.conftest import git
from tests.test_loop import DEMO_SCRIPT, project

VERIFIED = {
    "checks": [],
    "task_updates": [],
    "learnings": [],
    "summary": "checked",
    "learning_verdicts": [],
}
NOT_MET = {"spec_satisfied": False, "confidence": "medium", "gaps": [], "summary": "not met"}


def task(key: str, *deps: str, title: str | None = None, risk: str = "low") -> dict[str, Any]:
    return {
        "id": key,
        "task_id": None,
        "title": title or f"Task {key}",
        "description": f"write notes/{key}.txt",
        "depends_on": list(deps),
        "risk": risk,
        "tool_hints": [],
    }


def plan(*tasks: dict[str, Any], intent: str = "Add divide and its tests") -> dict[str, Any]:
    return {"intent": intent, "approach": "test first", "tasks": list(tasks)}


def planning(the_plan: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "actionable_work_exists": the_plan is not None,
        "new_tasks": [],
        "iteration_plan": the_plan,
        "stuck_reason": None if the_plan else "nothing to do",
        "learnings": [],
    }


def task_of(request: ModelRequest) -> dict[str, Any]:
    """The plan task an executor request is about (its `## Task` input)."""
    text = request.messages[0].text
    return json.loads(text.split("## Task\n\n", 1)[1].split("\n\n## ", 1)[0])


def key_of(request: ModelRequest) -> str:
    """The plan key of the executor's task, read from its description ("write
    notes/KEY.txt", as `task` writes it): the executor is shown the Trace task id,
    and follows the description, as a real one would."""
    match = re.search(r"notes/(\S+)\.txt", task_of(request)["description"])
    assert match, task_of(request)
    return match.group(1)


def done(summary: str = "done") -> Reply:
    """The executor's answer: the task is finished, nothing else to report."""
    return submit(
        {
            "tasks_blocked": [],
            "task_comments": [],
            "new_subtasks": [],
            "learnings": [],
            "summary": summary,
        }
    )


def executor(request: ModelRequest) -> Reply:
    """Write notes/<key>.txt on the first turn, then submit."""
    if first_turn(request):
        return call(
            "write_file", path=f"notes/{key_of(request)}.txt", content=task_of(request)["title"]
        )
    return done("wrote the note")


def fake_model(the_plan: dict[str, Any] | None, **extra: Any) -> FunctionModel:
    """Verifier and assessor (spec not met), the planner proposing `the_plan`, the
    executor writing notes; `extra` adds or replaces agents' answer functions."""
    answers = {
        "verifier": lambda request: submit(VERIFIED),
        "assessor": lambda request: submit(NOT_MET),
        "planner": lambda request: submit(planning(the_plan)),
        "executor": executor,
        **extra,
    }
    return FunctionModel.by_agent(answers)


def new_project(tmp_path: Path, settings: dict[str, str] | None = None) -> Path:
    """The demo's sample project, with `settings` replacing lines of soda.toml."""
    root = project(tmp_path, DEMO_SCRIPT)
    if settings:
        config = root / "soda.toml"
        text = config.read_text()
        for old, new in settings.items():
            assert old in text, old
            text = text.replace(old, new)
        config.write_text(text)
        git(root, "commit", "-q", "--allow-empty", "-am", "configure")
    return root


def open_session(root: Path, model: FunctionModel) -> Session:
    return Session.open(load(root / "soda.toml"), model=model)


def recording(answer: Any, into: list[str]) -> Any:
    """`answer`, keeping the first user message (the rendered inputs) of each run."""

    def wrapped(request: ModelRequest) -> Reply:
        if len(request.messages) == 1:
            into.append(request.messages[0].text)
        return answer(request)

    return wrapped


def events(session: Session, kind: str) -> list[dict[str, Any]]:
    rows = session.db.execute("SELECT data_json FROM events WHERE kind = ? ORDER BY id", [kind])
    return [json.loads(row[0]) for row in rows]


def set_key(root: Path, key: str, value: str) -> None:
    """Set `key = value` in soda.toml (the key's one line, commented out or not), and
    commit it."""
    config = root / "soda.toml"
    pattern = rf"(?m)^(# )?{re.escape(key)} = .*$"
    text, count = re.subn(pattern, f"{key} = {value}", config.read_text())
    assert count == 1, key
    config.write_text(text)
    git(root, "commit", "-q", "--allow-empty", "-am", f"configure {key}")
