"""ORIENT's first message shrinks to fit the model's context window, in a fixed
order: the repository map, the learnings, the history, then the rest of the
claims; what was left out is said. Real claims (SENSE on a real repository), the
real read-only tools and the real runner; the model is a FunctionModel."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from soda.agent.definition import Agent, first_message, load_agent
from soda.agent.recorder import CallRecorder
from soda.agent.runtime import AgentRunner
from soda.config import Config, ModelConfig
from soda.contracts import Claims, IterationBrief
from soda.errors import ContextTooSmall
from soda.events import Events
from soda.llm.function import FunctionModel, submit
from soda.loop.fit import ShrunkClaims, fit_inputs
from soda.loop.run import Ending, run_loop
from soda.store import Database, open_db
from soda.tools import Sandbox, read_only_tools
from soda.tools.toolbox import Toolbox
from soda.tools.treemap import RepoMap
from tests.plan_fakes import (
    VERIFIED,
    events,
    fake_model,
    new_project,
    open_session,
    recording,
    set_key,
)
from tests.test_claims_text import claims_of

RULES = "Test command: `python -m pytest -q`."
MAP_LINES = [f"src/module_{n}.py: def function_{n}(a, b), class Thing{n}" for n in range(300)]
LESSON = "a lesson about the calculator module, its tests and how they are run, "


@pytest.fixture
def claims(repo: Path, tmp_path: Path) -> Claims:
    claims = claims_of(repo, tmp_path)
    recent = [
        IterationBrief(
            number=n,
            intent="add divide with a zero check",
            decision="CONTINUE",
            outcome="gate_failed",
            summary="tried to add divide; the gate held it for a failing test " * 3,
        )
        for n in range(20, 0, -1)
    ]
    learnings = [f"L{n}: {LESSON * 3}" for n in range(40, 0, -1)]
    project = claims.project.model_copy(update={"learnings": learnings, "recent": recent})
    return claims.model_copy(update={"project": project})


@pytest.fixture
def db(tmp_path: Path) -> Database:
    return open_db(tmp_path / "soda.db")


@pytest.fixture
def tools(repo: Path) -> Toolbox:
    return read_only_tools(Sandbox(repo))


def runner(db: Database, window: int) -> AgentRunner:
    settings = ModelConfig(strong="m", fast="m", max_tokens=1000, context_window=window)
    config = Config(model=settings)
    model = FunctionModel(lambda request: submit(VERIFIED))
    return AgentRunner(model, config, CallRecorder(db, config, "function", Events(db)))


def needed(db: Database, agent: Agent[Any], inputs: dict[str, Any], tools: Toolbox) -> int:
    """The window that fits the agent's first request with these inputs exactly, its
    tools offered as that window offers them (a small one, in short forms)."""
    window = 0
    fitted = 200_000
    while fitted != window:  # the short forms shrink the window they need: a few rounds
        window = fitted
        fitted = runner(db, window).overflow(agent, inputs, tools) + window
    return window


def shrunk_events(db: Database) -> list[dict[str, Any]]:
    rows = db.execute("SELECT data_json FROM events WHERE kind = 'agent.inputs_shrunk'")
    return [json.loads(row[0]) for row in rows]


def test_inputs_that_fit_are_left_alone(db: Database, claims: Claims, tools: Toolbox) -> None:
    verifier = load_agent("verifier")
    inputs = {
        "spec": "# Spec",
        "tests_and_merges": RULES,
        "claims": claims,
        "repo_map": "\n".join(MAP_LINES),
    }
    assert fit_inputs(runner(db, 200_000), verifier, inputs, tools) is inputs
    assert shrunk_events(db) == []


def test_the_repository_map_goes_first(db: Database, claims: Claims, tools: Toolbox) -> None:
    verifier = load_agent("verifier")
    inputs = {
        "spec": "# Spec",
        "tests_and_merges": RULES,
        "claims": claims,
        "repo_map": "\n".join(MAP_LINES),
    }
    half = "\n".join(MAP_LINES[:150])
    note = ("the repository map (in part)",)
    window = needed(
        db, verifier, {**inputs, "repo_map": half, "claims": ShrunkClaims(claims, note)}, tools
    )
    small = runner(db, window)
    assert small.overflow(verifier, inputs, tools) > 0
    fitted = fit_inputs(small, verifier, inputs, tools)
    assert small.overflow(verifier, fitted, tools) <= 0
    assert fitted["repo_map"] == half  # halved once: enough
    assert fitted["claims"].claims.project.learnings == claims.project.learnings
    message = first_message(verifier, fitted)
    changing = message.text[message.cache_breaks[-1] :]  # the note goes with what changes
    assert "(Left out to fit the model's context window: the repository map (in part)." in changing
    assert list(fitted) == list(inputs)  # names and order as they were
    # What lasts of the claims is as it would be without the note (still cached).
    whole = first_message(verifier, {**inputs, "repo_map": half})
    assert whole.cache_breaks == message.cache_breaks and len(message.cache_breaks) == 4
    assert whole.text[: whole.cache_breaks[-1]] == message.text[: message.cache_breaks[-1]]
    assert shrunk_events(db) == [
        {
            "agent": "verifier",
            "tokens_over": small.overflow(verifier, inputs, tools),
            "left_out": ["the repository map (in part)"],
            "fits": True,
        }
    ]


def test_the_planners_map_loses_its_last_lines_and_keeps_its_count(
    db: Database, claims: Claims, tools: Toolbox
) -> None:
    planner = load_agent("planner")
    mapped = RepoMap("\n".join(MAP_LINES), "[700 of 1000 files left out; call repo_map ...]")
    inputs = {name: "" for name in planner.inputs} | {"claims": claims, "repo_map": mapped}
    half = mapped.halved()
    assert half.listing == "\n".join(MAP_LINES[:150]) and half.counts == mapped.counts
    note = ("the repository map (in part)",)
    window = needed(
        db, planner, {**inputs, "repo_map": half, "claims": ShrunkClaims(claims, note)}, tools
    )
    fitted = fit_inputs(runner(db, window), planner, inputs, tools)
    assert fitted["repo_map"] == half
    message = first_message(planner, fitted)
    # The map's listing is a lasting part of its own, its count with what changes.
    listing_end = message.text.index(half.listing) + len(half.listing) + 2
    assert listing_end in message.cache_breaks
    assert message.text.index(mapped.counts) > message.cache_breaks[-1]
    [event] = shrunk_events(db)
    assert event["left_out"] == ["the repository map (in part)"] and event["fits"]


def test_the_learnings_go_before_the_history(db: Database, claims: Claims, tools: Toolbox) -> None:
    verifier = load_agent("verifier")
    inputs = {
        "spec": "# Spec",
        "tests_and_merges": RULES,
        "claims": claims,
        "repo_map": "\n".join(MAP_LINES),
    }
    without = claims.model_copy(
        update={"project": claims.project.model_copy(update={"learnings": []})}
    )
    note = ("the repository map (in part)", "older learnings")
    window = needed(
        db, verifier, {**inputs, "repo_map": "", "claims": ShrunkClaims(without, note)}, tools
    )
    small = runner(db, window)
    fitted = fit_inputs(small, verifier, inputs, tools)
    assert small.overflow(verifier, fitted, tools) <= 0
    kept = fitted["claims"].claims.project
    assert kept.learnings == [] and kept.recent == claims.project.recent
    assert "older learnings" in first_message(verifier, fitted).text
    [event] = shrunk_events(db)
    assert event["left_out"] == ["the repository map (in part)", "older learnings"]


def test_what_cannot_fit_is_cut_in_order_then_refused(
    db: Database, claims: Claims, tools: Toolbox
) -> None:
    verifier = load_agent("verifier")
    inputs = {
        "spec": "# Spec",
        "tests_and_merges": RULES,
        "claims": claims,
        "repo_map": "\n".join(MAP_LINES),
    }
    small = runner(db, 2048)
    fitted = fit_inputs(small, verifier, inputs, tools)
    [event] = shrunk_events(db)
    assert event["fits"] is False
    order = event["left_out"]
    assert order[:4] == [
        "the repository map (in part)",
        "older learnings",
        "older iterations",
        "the last attempt's detail",
    ]
    assert "older task comments" in order[4:]  # then the rest of the claims
    kept = fitted["claims"].claims
    assert kept.project.learnings == [] and kept.project.recent == []
    assert kept.work.open == claims.work.open  # the open work is never cut
    with pytest.raises(ContextTooSmall, match="set model.context_window"):
        small.run(verifier, fitted, tools)


def test_orient_shrinks_its_agents_inputs_in_a_real_iteration(tmp_path: Path) -> None:
    """Many long learnings on a window that cannot hold them all: every ORIENT
    agent's first message leaves the older ones out, and the iteration goes on."""
    root = new_project(tmp_path)
    set_key(root, "max_learnings", "100")
    set_key(root, "context_window", "8000")
    firsts: list[str] = []
    model = fake_model(
        None,  # no plan: the iteration ends STUCK after ORIENT, without ACT
        verifier=recording(lambda request: submit(VERIFIED), firsts),
    )
    session = open_session(root, model)
    session.store_learnings([f"L{n}: {LESSON * 4}" for n in range(60)], "orient", None)
    result = run_loop(session, lambda line: None, once=True)
    assert result.ending is Ending.STUCK, result.reason
    [verifier_message] = firsts
    assert "(Left out to fit the model's context window: older learnings." in verifier_message
    assert verifier_message.count("\n- L") < 60  # not every learning is there
    shrunk = events(session, "agent.inputs_shrunk")
    assert {e["agent"] for e in shrunk} >= {"verifier", "assessor", "planner"}
    # The planner's repository map goes first (the demo's is short: all of it).
    for event in shrunk:
        first = "the repository map (in part)" if event["agent"] == "planner" else None
        assert event["fits"] and event["left_out"] == [
            *([first] if first else []),
            "older learnings",
        ], event
