"""Learnings stay clean: the verifier retires stale ones with a reason, a retired
learning is never shown again nor learned twice, and only the newest
[context] max_learnings stay active. End to end on the demo project, real git
and SQLite, the model a FunctionModel (what an agent was shown is asserted on
the request it received)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from soda.cli.demo import prepare
from soda.config import ContextConfig, load
from soda.llm.base import ModelRequest
from soda.llm.function import FunctionModel, submit
from soda.loop.run import Ending, run_iteration
from soda.loop.session import Session
from soda.store import Database, learnings, open_db

NOT_MET = {"spec_satisfied": False, "confidence": "high", "gaps": [], "summary": "not met"}


def stuck(learned: list[str]) -> dict[str, Any]:
    return submit(
        {
            "actionable_work_exists": False,
            "new_tasks": [],
            "iteration_plan": None,
            "stuck_reason": "nothing to do in this test",
            "learnings": learned,
        }
    )


def verification(verdicts: list[dict[str, Any]]) -> dict[str, Any]:
    return submit(
        {
            "checks": [],
            "task_updates": [],
            "learnings": [],
            "summary": "checked",
            "learning_verdicts": verdicts,
        }
    )


def first_text(request: ModelRequest) -> str:
    return request.messages[0].text


def open_session(tmp_path: Path, model: FunctionModel, **context: Any) -> Session:
    config = load(prepare(tmp_path / "project"))
    if context:
        config = config.model_copy(update={"context": ContextConfig(**context)})
    return Session.open(config, model)


# --- the store --------------------------------------------------------------


def test_past_the_cap_the_oldest_are_retired_with_the_reason(tmp_path: Path) -> None:
    db: Database = open_db(tmp_path / "soda.db")
    assert learnings.add(db, ["one", "two", "three"], "verifier", None, cap=2) == 3
    assert learnings.active(db) == ["L3: three", "L2: two"]
    [old] = learnings.retired(db)
    assert (old.id, old.text) == (1, "one")
    assert "max_learnings" in old.reason


def test_a_retired_learning_is_not_learned_again(tmp_path: Path) -> None:
    db = open_db(tmp_path / "soda.db")
    learnings.add(db, ["tests live in tests/"], "verifier", None)
    assert learnings.retire(db, 1, "they moved to t/", None)
    assert learnings.add(db, ["tests live in tests/", "t/ holds the tests"], "planner", None) == 1
    assert learnings.active(db) == ["L2: t/ holds the tests"]
    assert db.execute("SELECT count(*) FROM learnings").fetchone()[0] == 2


def test_retiring_an_unknown_or_retired_learning_changes_nothing(tmp_path: Path) -> None:
    db = open_db(tmp_path / "soda.db")
    learnings.add(db, ["a fact"], "verifier", None)
    assert learnings.retire(db, 7, "no such learning", None) is False
    assert learnings.retire(db, 1, "stale", None) is True
    assert learnings.retire(db, 1, "stale again", None) is False
    assert learnings.retired(db)[0].reason == "stale"


# --- end to end ---------------------------------------------------------------


def test_a_learning_the_verifier_retires_is_not_shown_to_the_next_agent(tmp_path: Path) -> None:
    shown: dict[str, list[str]] = {"verifier": [], "assessor": []}

    def verifier(request: ModelRequest) -> dict[str, Any]:
        text = first_text(request)
        shown["verifier"].append(text)
        if "L1: calc lives in src/calc.py" in text:
            return verification(
                [
                    {"learning_id": 1, "keep": False, "reason": "calc.py is at the top level"},
                    {"learning_id": 2, "keep": True, "reason": "still true"},
                ]
            )
        return verification([])

    def assessor(request: ModelRequest) -> dict[str, Any]:
        shown["assessor"].append(first_text(request))
        return submit(NOT_MET)

    model = FunctionModel.by_agent(
        {
            "verifier": verifier,
            "assessor": assessor,
            # The planner learns the retired fact again: it stays retired.
            "planner": lambda request: stuck(["calc lives in src/calc.py"]),
        }
    )
    session = open_session(tmp_path, model)
    session.store_learnings(
        ["calc lives in src/calc.py", "run the tests with pytest -q"], "human", None
    )
    assert run_iteration(session, lambda line: None).ending is Ending.STUCK
    assert "L1: calc lives in src/calc.py" in shown["verifier"][0]

    assert run_iteration(session, lambda line: None).ending is Ending.STUCK
    for agent in ("verifier", "assessor"):
        later = shown[agent][1]
        assert "calc lives in src/calc.py" not in later, agent
        assert "L2: run the tests with pytest -q" in later, agent
    row = session.db.execute(
        "SELECT active, retired_reason, retired_iteration_id FROM learnings WHERE id = 1"
    ).fetchone()
    first_iteration = session.db.execute("SELECT id FROM iterations WHERE number = 1").fetchone()
    assert row == (0, "calc.py is at the top level", first_iteration[0])
    texts = [r[0] for r in session.db.execute("SELECT text FROM learnings")]
    assert texts.count("calc lives in src/calc.py") == 1
    kinds = [
        r[0] for r in session.db.execute("SELECT kind FROM events WHERE kind LIKE 'learning.%'")
    ]
    assert kinds == ["learning.retired"]


def test_agents_see_only_the_newest_max_learnings(tmp_path: Path) -> None:
    shown: list[str] = []

    def verifier(request: ModelRequest) -> dict[str, Any]:
        shown.append(first_text(request))
        return verification([])

    model = FunctionModel.by_agent(
        {
            "verifier": verifier,
            "assessor": lambda request: submit(NOT_MET),
            "planner": lambda request: stuck([]),
        }
    )
    session = open_session(tmp_path, model, max_learnings=3)
    session.store_learnings([f"fact number {n}" for n in range(1, 6)], "human", None)
    run_iteration(session, lambda line: None)
    [text] = shown
    for n in (3, 4, 5):
        assert f"L{n}: fact number {n}" in text
    for n in (1, 2):
        assert f"fact number {n}" not in text
    assert len(learnings.active(session.db)) == 3
