"""The behavioural fake model: answers computed from the request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from soda.agent.definition import load_agent
from soda.agent.recorder import CallRecorder
from soda.agent.runtime import AgentRunner
from soda.config import Config, ModelConfig
from soda.contracts import Assessment
from soda.errors import ScriptError
from soda.events import Events
from soda.llm.base import ModelRequest, ToolSpec
from soda.llm.function import FunctionModel, call, first_turn, last_results, submit
from soda.store import open_db


class Echo:
    """One tool that echoes its argument."""

    def specs(self) -> list[ToolSpec]:
        schema = {"type": "object", "properties": {"say": {"type": "string"}}}
        return [ToolSpec("echo", "echo", schema)]

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        from types import SimpleNamespace

        return SimpleNamespace(content=f"echo: {arguments.get('say')}", is_error=False)


def assessment(summary: str) -> dict[str, Any]:
    return {"spec_satisfied": False, "confidence": "high", "gaps": [], "summary": summary}


INPUTS = {"spec": "# S", "claims": {}, "verification": "ok"}


@pytest.fixture
def runner_for(tmp_path: Path):
    db = open_db(tmp_path / "soda.db")
    config = Config(model=ModelConfig(max_turns=4))

    def make(model: FunctionModel) -> AgentRunner:
        return AgentRunner(model, config, CallRecorder(db, config, "function", Events(db)))

    return make


def test_the_answer_is_computed_from_the_last_tool_result(runner_for) -> None:
    def answer(request: ModelRequest) -> dict[str, Any]:
        if first_turn(request):
            return call("echo", say="hello")
        return submit(assessment(f"saw {last_results(request)[0]}"))

    model = FunctionModel(answer)
    result = runner_for(model).run(load_agent("assessor"), INPUTS, Echo())
    assert isinstance(result.output, Assessment)
    assert result.output.summary == "saw echo: hello"
    assert model.calls == 2


def test_by_agent_refuses_an_agent_without_an_answer(runner_for) -> None:
    model = FunctionModel.by_agent({"verifier": lambda request: submit({})})
    with pytest.raises(ScriptError, match="no answer for agent assessor"):
        runner_for(model).run(load_agent("assessor"), INPUTS, Echo())


def test_a_tool_the_agent_was_not_offered_is_refused(runner_for) -> None:
    model = FunctionModel(lambda request: call("write_file", path="x"))
    with pytest.raises(ScriptError, match="'write_file'"):
        runner_for(model).run(load_agent("assessor"), INPUTS, Echo())
