"""The agent runtime and the scripted provider: tool loop, validation, recording, budget."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from soda.agent.definition import load_agent, render_inputs
from soda.agent.recorder import CallRecorder
from soda.agent.runtime import AgentRunner
from soda.config import BudgetConfig, Config, ModelConfig, Price
from soda.contracts import Assessment
from soda.errors import BudgetExhausted, ContractViolation, InputError, ScriptError
from soda.events import Events
from soda.llm.base import ModelRequest
from soda.llm.function import FunctionModel, call, first_turn
from soda.llm.function import submit as submit_fn
from soda.llm.scripted import ScriptedModel
from soda.store import open_db

ASSESSMENT = {
    "spec_satisfied": False,
    "confidence": "high",
    "gaps": [{"description": "divide is missing", "severity": "blocking"}],
    "summary": "not yet",
}


def submit(data: dict[str, Any], agent: str = "assessor", **extra: Any) -> dict[str, Any]:
    return {"agent": agent, "tool_calls": [{"name": "submit", "input": data}], **extra}


class Echo:
    """A minimal toolset: one tool that echoes, one that always refuses."""

    def specs(self) -> list:
        from soda.llm.base import ToolSpec

        schema = {"type": "object", "properties": {}, "additionalProperties": False}
        return [ToolSpec("echo", "echo", schema), ToolSpec("refuse", "refuse", schema)]

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        from types import SimpleNamespace

        return SimpleNamespace(content=f"{name} ok", is_error=name == "refuse")


@pytest.fixture
def setup(tmp_path: Path):
    db = open_db(tmp_path / "soda.db")
    config = Config(model=ModelConfig(max_turns=3))

    def make(responses: list[dict[str, Any]], config: Config = config):
        model = ScriptedModel(responses)
        recorder = CallRecorder(db, config, "scripted", Events(db))
        return model, AgentRunner(model, config, recorder), recorder

    return db, make


INPUTS = {"spec": "# Spec", "claims": {"x": 1}, "verification": "ok"}


def test_valid_answer_is_typed_and_every_call_recorded(setup) -> None:
    db, make = setup
    model, runner, _ = make(
        [{"agent": "assessor", "tool_calls": [{"name": "echo", "input": {}}]}, submit(ASSESSMENT)]
    )
    answer = runner.run(load_agent("assessor"), INPUTS, Echo())
    assert isinstance(answer.output, Assessment)
    assert answer.turns == 2
    assert [row["turn"] for row in db["agent_calls"].rows] == [1, 2]
    second = model.requests[1]
    assert second.messages[-1].tool_results[0].content == "echo ok"
    assert {t.name for t in second.tools} == {"echo", "refuse", "submit"}
    assert second.answer_tool == "submit"
    assert second.system.startswith("You are the assessor")


def test_first_message_renders_inputs_in_declared_order() -> None:
    text = render_inputs(load_agent("assessor"), {**INPUTS, "extra_note": "late"})
    assert text.index("## Spec") < text.index("## Claims") < text.index("## Verification")
    assert text.index("## Verification") < text.index("## Extra Note")


def test_missing_input_is_structural() -> None:
    with pytest.raises(Exception, match="needs inputs"):
        render_inputs(load_agent("assessor"), {"spec": "x"})


def test_schema_violation_raises_with_path_and_raw(setup) -> None:
    _, make = setup
    bad = submit({**ASSESSMENT, "confidence": "certain"})
    _, runner, _ = make([bad, bad])  # the first slip goes back to the model; a repeat halts
    with pytest.raises(ContractViolation) as info:
        runner.run(load_agent("assessor"), INPUTS, None)
    assert info.value.violation.path == "$.confidence"
    assert info.value.violation.rule == "enum"
    assert info.value.agent == "assessor"
    assert info.value.raw["confidence"] == "certain"


def test_turn_limit_asks_once_more_for_the_answer_alone(setup) -> None:
    _, make = setup
    echo = {"agent": "assessor", "tool_calls": [{"name": "echo", "input": {}}]}
    model, runner, _ = make([echo, echo, echo, submit(ASSESSMENT)])
    answer = runner.run(load_agent("assessor"), INPUTS, Echo())
    assert isinstance(answer.output, Assessment) and answer.turns == 4
    last = model.requests[-1]
    assert last.must_call == ("submit",)
    assert {t.name for t in last.tools} == {"echo", "refuse", "submit"}  # the cache holds
    assert "You have used all 3 turns" in last.messages[-1].text
    assert last.messages[-1].tool_results[0].content == "echo ok"  # same user turn


def test_answer_without_tool_call_gets_one_reminder(setup) -> None:
    _, make = setup
    model, runner, _ = make(
        [{"agent": "assessor", "text": "I think it is fine."}, submit(ASSESSMENT)]
    )
    answer = runner.run(load_agent("assessor"), INPUTS, None)
    assert isinstance(answer.output, Assessment)
    said, reminder = model.requests[1].messages[-2:]
    assert (said.role, said.text) == ("assistant", "I think it is fine.")
    assert reminder.role == "user" and "without calling a tool" in reminder.text


def test_script_running_out_is_a_clear_error(setup) -> None:
    _, make = setup
    _, runner, _ = make([])
    with pytest.raises(ScriptError, match="ran out after 0 responses"):
        runner.run(load_agent("assessor"), INPUTS, None)


def test_script_for_another_agent_is_refused(setup) -> None:
    _, make = setup
    _, runner, _ = make([submit(ASSESSMENT, agent="planner")])
    with pytest.raises(ScriptError, match="is for agent planner"):
        runner.run(load_agent("assessor"), INPUTS, None)


def test_script_calling_a_tool_the_agent_lacks_is_refused(setup) -> None:
    _, make = setup
    _, runner, _ = make([{"tool_calls": [{"name": "write_file", "input": {}}]}])
    with pytest.raises(ScriptError, match="does not have"):
        runner.run(load_agent("assessor"), INPUTS, None)


def test_scripted_tool_call_that_was_refused_stops_the_replay(setup) -> None:
    _, make = setup
    _, runner, _ = make([{"tool_calls": [{"name": "refuse", "input": {}}]}, submit(ASSESSMENT)])
    with pytest.raises(ScriptError, match="was refused"):
        runner.run(load_agent("assessor"), INPUTS, Echo())


def test_executor_may_give_up(setup) -> None:
    _, make = setup
    _, runner, _ = make(
        [{"tool_calls": [{"name": "cannot_complete", "input": {"reason": "needs a key"}}]}]
    )
    inputs = {name: f"({name})" for name in load_agent("executor").inputs}
    answer = runner.run(load_agent("executor"), inputs, None)
    assert answer.output is None and answer.gave_up == "needs a key"


def test_budget_smaller_than_one_call_stops_the_run(setup) -> None:
    _, make = setup
    config = Config(
        model=ModelConfig(strong="m", fast="m", prices={"m": Price(input=1000.0, output=1000.0)}),
        budget=BudgetConfig(max_cost_usd=0.001),
    )
    _, runner, recorder = make(
        [submit(ASSESSMENT, usage={"input_tokens": 100, "output_tokens": 10})], config
    )
    recorder.run_id = None
    with pytest.raises(BudgetExhausted, match=r"max_cost_usd \$0.0010"):
        runner.run(load_agent("assessor"), INPUTS, None)
    assert recorder.cost_usd == pytest.approx(0.11)


def test_script_file_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "script.json"
    bad.write_text("[1, 2]")
    with pytest.raises(InputError, match="responses"):
        ScriptedModel.from_file(bad)
    bad.write_text("{nope")
    with pytest.raises(InputError, match="script.json"):
        ScriptedModel.from_file(bad)


def test_a_model_that_starts_mid_run_begins_at_its_iterations_mark(setup) -> None:
    """A scripted model new to a run (its run moved to another process) starts at
    the answer marked with the iteration it is first asked for; one that has
    answered goes on in order, whatever the marks say."""
    _, make = setup
    first = {**submit(ASSESSMENT), "iteration": 1}
    second = {**submit({**ASSESSMENT, "summary": "iteration two"}), "iteration": 2}

    def ask(runner: AgentRunner, iteration: int) -> str:
        asking = runner.recording_to(runner.record, iteration)
        answer = asking.run(load_agent("assessor", Assessment), INPUTS, Echo())
        return answer.value.summary

    model, runner, _ = make([first, second])
    assert ask(runner, 2) == "iteration two" and model.position == 2
    assert [request.iteration for request in model.requests] == [2]
    unmarked = submit({**ASSESSMENT, "summary": "unmarked"})
    model, runner, _ = make([first, unmarked, second])
    assert ask(runner, 1) == "not yet"
    assert ask(runner, 2) == "unmarked"  # it answered before: in order, past the mark


@pytest.mark.parametrize("mark", [0, "2", True, None])
def test_a_bad_iteration_mark_names_the_answer(tmp_path: Path, mark: Any) -> None:
    entries = [{**submit(ASSESSMENT), "iteration": 1}, {**submit(ASSESSMENT), "iteration": mark}]
    if mark is None:
        entries[1]["iteration"] = 1  # twice
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"responses": entries}))
    with pytest.raises(InputError, match="script.json: response 1: iteration is the number"):
        ScriptedModel.from_file(path)


def agent_events(db: Any) -> list[tuple[str, dict[str, Any]]]:
    rows = db.execute(
        "SELECT kind, data_json FROM events WHERE kind IN ('agent.start', 'agent.end') ORDER BY id"
    )
    return [(kind, json.loads(data)) for kind, data in rows]


def test_each_run_is_framed_by_agent_start_and_agent_end(setup) -> None:
    """The live view's events: who runs on which tier, and how it ended."""
    db, _ = setup
    config = Config(model=ModelConfig(max_turns=3, strong="big", fast="small"))
    recorder = CallRecorder(db, config, "function", Events(db))

    def answer(request: ModelRequest) -> dict[str, Any]:
        if request.agent == "executor":
            return call("cannot_complete", reason="needs a key")
        if first_turn(request):
            return call("echo")
        if request.agent == "verifier":
            return submit_fn({"summary": 42})  # breaks the contract
        return submit_fn(ASSESSMENT)

    runner = AgentRunner(FunctionModel(answer), config, recorder)
    runner.run(load_agent("assessor"), INPUTS, Echo())
    executor_inputs = {name: "-" for name in load_agent("executor").inputs}
    runner.run(load_agent("executor"), executor_inputs, None)
    with pytest.raises(ContractViolation):
        runner.run(
            load_agent("verifier"), {"spec": "s", "tests_and_merges": "", "claims": {}}, Echo()
        )
    assert agent_events(db) == [
        ("agent.start", {"agent": "assessor", "tier": "strong", "model": "big"}),
        ("agent.end", {"agent": "assessor", "turns": 2, "outcome": "answered"}),
        ("agent.start", {"agent": "executor", "tier": "strong", "model": "big"}),
        ("agent.end", {"agent": "executor", "turns": 1, "outcome": "gave_up"}),
        ("agent.start", {"agent": "verifier", "tier": "fast", "model": "small"}),
        # Turn 2's broken answer went back to the model; turn 3's repeat ended the run.
        ("agent.end", {"agent": "verifier", "turns": 3, "outcome": "error"}),
    ]
