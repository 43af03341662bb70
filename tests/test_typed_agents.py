"""Typed agents: an agent knows its output model, and its run's answer has that type."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from soda.agent.definition import load_agent
from soda.agent.recorder import CallRecorder
from soda.agent.runtime import AgentRunner
from soda.config import Config, ModelConfig
from soda.config.resources import resource_dir
from soda.contracts import (
    CONTRACTS,
    Assessment,
    Contract,
    ExecuteResult,
    PlanningChoice,
    RetryAdvice,
    Verification,
)
from soda.errors import ContractViolation, StructuralError
from soda.events import Events
from soda.llm.base import ModelRequest
from soda.llm.function import FunctionModel, call, submit
from soda.store import open_db

ASSESSMENT = {"spec_satisfied": False, "confidence": "high", "gaps": [], "summary": "not yet"}
ASSESSOR_INPUTS = {"spec": "# Spec", "claims": {}, "verification": "ok"}


def shipped_agents() -> list[tuple[str, str]]:
    """(name, contract) of every agent file soda ships."""
    found = []
    for path in sorted(resource_dir("agents").glob("*.md")):
        text = path.read_text(encoding="utf-8")
        if not text.startswith("+++"):
            continue  # the README
        meta = tomllib.loads(text.split("+++", 2)[1])
        found.append((meta["name"], meta["contract"]))
    return found


@pytest.fixture
def runner_for(tmp_path: Path):
    db = open_db(tmp_path / "soda.db")
    config = Config(model=ModelConfig(max_turns=3))

    def make(model: FunctionModel) -> AgentRunner:
        return AgentRunner(model, config, CallRecorder(db, config, "function", Events(db)))

    return make


# --- loading ----------------------------------------------------------------


def test_every_shipped_agent_loads_as_the_model_of_its_contract() -> None:
    agents = shipped_agents()
    assert {name for name, _ in agents} >= {"verifier", "assessor", "planner", "executor"}
    for name, contract in agents:
        agent = load_agent(name, CONTRACTS[contract])
        assert agent.contract == contract
        assert agent.output_type is CONTRACTS[contract]


def test_a_type_other_than_the_declared_contract_is_refused() -> None:
    with pytest.raises(StructuralError) as info:
        load_agent("verifier", Assessment)
    message = str(info.value)
    # Both sides are named: the file's contract and its model, and the type given.
    assert "verifier" in message
    assert "'verification'" in message and "Verification" in message
    assert "Assessment" in message


def test_the_base_contract_is_not_a_match_either() -> None:
    """Only the declared model is: a wider type would be a silent loss of typing."""
    with pytest.raises(StructuralError, match="loaded as Contract"):
        load_agent("assessor", Contract)


def test_without_a_type_the_agent_still_validates_into_its_declared_model() -> None:
    untyped = load_agent("retrier")
    typed = load_agent("retrier", RetryAdvice)
    assert untyped.output_type is RetryAdvice
    assert untyped == typed


# --- running ----------------------------------------------------------------


def test_run_returns_the_declared_type(runner_for) -> None:
    model = FunctionModel.by_agent(
        {
            "assessor": lambda request: submit(ASSESSMENT),
            "planning_mode": lambda request: submit({"multi_task": True, "reason": "three parts"}),
        }
    )
    runner = runner_for(model)

    assessment = runner.run(load_agent("assessor", Assessment), ASSESSOR_INPUTS, None).value
    assert type(assessment) is Assessment
    assert assessment.summary == "not yet" and assessment.spec_satisfied is False

    choice = runner.run(
        load_agent("planning_mode", PlanningChoice), {"spec": "# S", "work": {}}, None
    )
    assert type(choice.output) is PlanningChoice
    assert choice.value is choice.output and choice.value.multi_task is True


def test_a_schema_violating_answer_still_halts(runner_for) -> None:
    model = FunctionModel(lambda request: submit({**ASSESSMENT, "confidence": "certain"}))
    with pytest.raises(ContractViolation) as info:
        runner_for(model).run(load_agent("assessor", Assessment), ASSESSOR_INPUTS, None)
    assert info.value.violation.contract == "assessment"
    assert info.value.violation.path == "$.confidence"
    assert info.value.agent == "assessor"


def test_an_answer_for_another_contract_is_a_violation(runner_for) -> None:
    """A verifier answering with an assessment breaks the verification contract."""
    model = FunctionModel(lambda request: submit(ASSESSMENT))
    with pytest.raises(ContractViolation) as info:
        runner_for(model).run(
            load_agent("verifier", Verification),
            {"spec": "# S", "tests_and_merges": "", "claims": {}},
            None,
        )
    assert info.value.violation.contract == "verification"


def test_an_executor_that_gave_up_has_no_value(runner_for) -> None:
    def answer(request: ModelRequest) -> dict[str, Any]:
        return call("cannot_complete", reason="needs a key")

    executor = load_agent("executor", ExecuteResult)
    inputs = {name: f"({name})" for name in executor.inputs}
    result = runner_for(FunctionModel(answer)).run(executor, inputs, None)
    assert result.output is None and result.gave_up == "needs a key"
    with pytest.raises(StructuralError, match="gave up: needs a key"):
        _ = result.value
