"""A real model's ordinary failures go back to it once, then end as an ordinary
failure, never a HALT: the runtime over the real anthropic SDK against the local
Messages-API server (tests/fakeapi.py), and two iterations of the loop.

Each path is shown twice: the second chance that works (a last forced turn, a
raised max_tokens, a reminder to call a tool, a condensed history) and the second
failure that gives up (ModelGaveUp, a TransientError; an executor's task gives up).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from soda.agent.definition import load_agent
from soda.agent.recorder import CallRecorder
from soda.agent.runtime import AgentRunner
from soda.cli.demo import prepare
from soda.config import Config, ModelConfig, load
from soda.contracts import Assessment
from soda.errors import ContextTooSmall, ModelGaveUp, StructuralError, TransientError
from soda.events import Events
from soda.llm.anthropic import AnthropicModel
from soda.llm.base import ToolSpec, raised_limit
from soda.llm.scripted import ScriptedModel
from soda.loop.run import Ending, run_loop
from soda.loop.session import Session
from soda.store import open_db
from tests.fakeapi import (
    FakeAPI,
    Reply,
    max_tokens_response,
    message_response,
    prompt_too_long,
    text_response,
    tool_use_response,
)

pytest_plugins = ("tests.fakeapi",)

ASSESSMENT = {
    "spec_satisfied": False,
    "confidence": "high",
    "gaps": [{"description": "divide is missing", "severity": "blocking"}],
    "summary": "not yet",
}
ASSESSOR_INPUTS = {"spec": "# Spec", "claims": {"x": 1}, "verification": "ok"}
EXECUTOR_INPUTS = {name: f"({name})" for name in load_agent("executor").inputs}
RESULT_SIZE = 2000


class Tools:
    """One tool, `echo`, whose result is RESULT_SIZE characters long."""

    def specs(self) -> list[ToolSpec]:
        schema = {"type": "object", "properties": {}, "additionalProperties": False}
        return [ToolSpec("echo", "echo", schema)]

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        return SimpleNamespace(content="e" * RESULT_SIZE, is_error=False)


@pytest.fixture
def setup(tmp_path: Path, fake_api: FakeAPI, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")
    db = open_db(tmp_path / "soda.db")

    def make(**overrides: Any) -> AgentRunner:
        settings: dict[str, Any] = {
            "base_url": fake_api.url,
            "max_turns": 2,
            "max_tokens": 1000,
            "max_retries": 0,
            "read_timeout": 5.0,
        }
        config = Config(model=ModelConfig(**(settings | overrides)))
        events = Events(db)
        model = AnthropicModel(config.model, events.emit, sleep=lambda s: None)
        return AgentRunner(model, config, CallRecorder(db, config, "anthropic", events))

    return db, make


def echo() -> Reply:
    return tool_use_response("echo", {})


def submit(data: dict[str, Any] = ASSESSMENT, **kwargs: Any) -> Reply:
    return tool_use_response("submit", data, **kwargs)


def bodies(fake_api: FakeAPI) -> list[dict[str, Any]]:
    return [sent.body for sent in fake_api.requests]


def soft_failures(db: Any) -> list[dict[str, Any]]:
    rows = db.execute("SELECT data_json FROM events WHERE kind = 'agent.soft_failure' ORDER BY id")
    return [json.loads(row[0]) for row in rows]


def assert_ordinary(exc: ModelGaveUp, reason: str) -> None:
    assert exc.reason == reason
    assert isinstance(exc, TransientError) and not isinstance(exc, StructuralError)


# Turn limit: one last turn that asks for the answer alone


def test_turn_limit_forces_a_last_turn_whose_answer_is_used(setup, fake_api: FakeAPI) -> None:
    db, make = setup
    fake_api.enqueue(echo(), echo(), submit())
    answer = make().run(load_agent("assessor"), ASSESSOR_INPUTS, Tools())
    assert isinstance(answer.output, Assessment) and answer.turns == 3
    first, _, last = bodies(fake_api)
    assert last["tool_choice"] == {"type": "tool", "name": "submit"}
    assert [t["name"] for t in last["tools"]] == [t["name"] for t in first["tools"]]
    said = last["messages"][-1]["content"]
    assert [block["type"] for block in said] == ["tool_result", "text"]
    assert "You have used all 2 turns" in said[-1]["text"] and "submit" in said[-1]["text"]
    assert soft_failures(db) == [{"agent": "assessor", "failure": "turn_limit", "turn": 2}]


def test_turn_limit_then_no_answer_is_an_ordinary_failure(setup, fake_api: FakeAPI) -> None:
    _, make = setup
    fake_api.enqueue(echo(), echo(), echo())
    with pytest.raises(ModelGaveUp, match="turn limit: agent assessor did not submit") as caught:
        make().run(load_agent("assessor"), ASSESSOR_INPUTS, Tools())
    assert_ordinary(caught.value, "turn_limit")
    assert len(fake_api.requests) == 3


def test_executor_out_of_turns_gives_up_its_task(setup, fake_api: FakeAPI) -> None:
    _, make = setup
    fake_api.enqueue(echo(), echo(), echo())
    answer = make().run(load_agent("executor"), EXECUTOR_INPUTS, Tools())
    assert answer.output is None and answer.turns == 3
    assert answer.gave_up is not None and answer.gave_up.startswith("gave up: turn limit")
    last = bodies(fake_api)[-1]
    assert last["tool_choice"] == {"type": "any"}  # submit or cannot_complete
    assert "cannot_complete" in last["messages"][-1]["content"][-1]["text"]


def test_executor_may_still_say_why_on_its_last_turn(setup, fake_api: FakeAPI) -> None:
    _, make = setup
    fake_api.enqueue(echo(), echo(), tool_use_response("cannot_complete", {"reason": "too big"}))
    answer = make().run(load_agent("executor"), EXECUTOR_INPUTS, Tools())
    assert answer.gave_up == "turn limit (2 turns): too big"


# max_tokens: asked again once with a doubled limit


def test_max_tokens_is_asked_again_with_a_doubled_limit(setup, fake_api: FakeAPI) -> None:
    db, make = setup
    # The tool call being written when the limit struck is dropped as incomplete.
    fake_api.enqueue(submit({"spec_sat": True}, stop_reason="max_tokens"), echo(), submit())
    answer = make().run(load_agent("assessor"), ASSESSOR_INPUTS, Tools())
    assert isinstance(answer.output, Assessment)
    # The raised limit holds for the rest of the run.
    assert [body["max_tokens"] for body in bodies(fake_api)] == [1000, 2000, 2000]
    stops = [row["stop_reason"] for row in db["agent_calls"].rows]
    assert stops == ["max_tokens", "tool_use", "tool_use"]  # the cut call is paid for too
    assert soft_failures(db) == [
        {"agent": "assessor", "failure": "max_tokens", "turn": 1, "max_tokens": 1000,
         "raised_to": 2000}
    ]  # fmt: skip


def test_max_tokens_twice_is_an_ordinary_failure(setup, fake_api: FakeAPI) -> None:
    _, make = setup
    fake_api.enqueue(max_tokens_response("{"), max_tokens_response("{"))
    with pytest.raises(ModelGaveUp, match="again after it was raised") as caught:
        make().run(load_agent("assessor"), ASSESSOR_INPUTS, None)  # JSON-schema output
    assert_ordinary(caught.value, "max_tokens")
    assert [body["max_tokens"] for body in bodies(fake_api)] == [1000, 2000]


def test_max_tokens_at_the_models_maximum_is_not_raised(setup, fake_api: FakeAPI) -> None:
    _, make = setup
    fake_api.enqueue(max_tokens_response("{"))
    with pytest.raises(ModelGaveUp, match="the most this model allows") as caught:
        make(max_tokens=64000).run(load_agent("assessor"), ASSESSOR_INPUTS, None)
    assert_ordinary(caught.value, "max_tokens")
    assert len(fake_api.requests) == 1


def test_raised_limits_follow_the_model_table() -> None:
    assert raised_limit("claude-sonnet-4-6", 8192) == 16384
    assert raised_limit("claude-haiku-4-5", 40000) == 64000
    assert raised_limit("claude-opus-4-1-20250805", 32000) is None
    assert raised_limit("qwen2.5-coder", 4096) == 8192  # unknown model: doubled


# A turn with no tool call: the model is told to call one, once


def test_turn_without_a_tool_call_is_reminded(setup, fake_api: FakeAPI) -> None:
    db, make = setup
    fake_api.enqueue(text_response("It looks fine to me."), submit())
    answer = make().run(load_agent("assessor"), ASSESSOR_INPUTS, Tools())
    assert isinstance(answer.output, Assessment)
    said, reminder = bodies(fake_api)[1]["messages"][-2:]
    assert said == {
        "role": "assistant",
        "content": [{"type": "text", "text": "It looks fine to me."}],
    }
    assert reminder["role"] == "user"
    assert "without calling a tool" in reminder["content"][-1]["text"]
    assert soft_failures(db) == [{"agent": "assessor", "failure": "no_tool_call", "turn": 1}]


def test_no_tool_call_twice_is_an_ordinary_failure(setup, fake_api: FakeAPI) -> None:
    _, make = setup
    fake_api.enqueue(text_response("Fine."), message_response([], stop_reason="end_turn"))
    with pytest.raises(ModelGaveUp, match="again after being told to") as caught:
        make().run(load_agent("assessor"), ASSESSOR_INPUTS, Tools())
    assert_ordinary(caught.value, "no_tool_call")


# Prompt too long: older tool results condensed, asked again once


def test_prompt_too_long_condenses_older_results_and_retries(setup, fake_api: FakeAPI) -> None:
    db, make = setup
    fake_api.enqueue(echo(), echo(), prompt_too_long(), submit())
    answer = make(max_turns=3).run(load_agent("assessor"), ASSESSOR_INPUTS, Tools())
    assert isinstance(answer.output, Assessment)
    refused, retried = bodies(fake_api)[2:]
    assert len(json.dumps(retried)) < len(json.dumps(refused)) - RESULT_SIZE + 300
    older = retried["messages"][2]["content"][0]
    assert older["type"] == "tool_result"
    assert older["content"] == (
        '[condensed: echo {} returned 2,000 characters, starting "'
        + "e" * 57
        + '..."; call it again if you need them]'
    )
    latest = retried["messages"][4]["content"][0]
    assert latest["content"] == "e" * RESULT_SIZE  # the latest results stay whole
    [event] = soft_failures(db)
    assert event["failure"] == "prompt_too_long"
    assert event["characters_after"] < event["characters_before"] - RESULT_SIZE + 300


def test_prompt_too_long_twice_is_an_ordinary_failure(setup, fake_api: FakeAPI) -> None:
    _, make = setup
    fake_api.enqueue(echo(), echo(), prompt_too_long(), prompt_too_long())
    with pytest.raises(ModelGaveUp, match="even with older tool results condensed") as caught:
        make(max_turns=3).run(load_agent("assessor"), ASSESSOR_INPUTS, Tools())
    assert_ordinary(caught.value, "prompt_too_long")
    assert len(fake_api.requests) == 4


def test_prompt_too_long_with_nothing_to_condense_is_the_persons_to_fix(
    setup, fake_api: FakeAPI
) -> None:
    """A first request refused as too long has nothing to condense and would be
    refused again: a user error naming the setting, not a transient failure."""
    _, make = setup
    fake_api.enqueue(prompt_too_long())
    with pytest.raises(ContextTooSmall, match="model.context_window") as caught:
        make().run(load_agent("assessor"), ASSESSOR_INPUTS, Tools())
    assert caught.value.exit_code == 2
    assert len(fake_api.requests) == 1


# Lone surrogates never reach SQLite or JSON


def test_lone_surrogates_are_stored_and_passed_on_as_replacement_characters(
    tmp_path: Path,
) -> None:
    db = open_db(tmp_path / "soda.db")
    config = Config(model=ModelConfig(max_turns=2))
    answer = {**ASSESSMENT, "summary": "not yet \udc00"}
    model = ScriptedModel(
        [{"agent": "assessor", "text": "half an emoji \ud83d", "tool_calls": [
            {"name": "submit", "input": answer}]}]
    )  # fmt: skip
    runner = AgentRunner(model, config, CallRecorder(db, config, "scripted", Events(db)))
    result = runner.run(load_agent("assessor"), ASSESSOR_INPUTS, None)
    assert isinstance(result.output, Assessment)
    assert result.output.summary == "not yet \ufffd"
    [row] = db["agent_calls"].rows
    assert "half an emoji \ufffd" in row["response_json"]


# The loop: no HALT, and an executor's give-up lets the iteration go on

DEMO = json.loads((Path(__file__).parent.parent / "soda/demo/script.json").read_text())["responses"]
PYTHON = json.dumps(sys.executable)[1:-1]


def wire(entry: dict[str, Any]) -> Reply:
    """A demo-script entry as the Messages API would send it."""
    blocks = [
        {
            "type": "tool_use",
            "id": f"toolu_{id(entry)}_{n}",
            "name": call["name"],
            "input": json.loads(json.dumps(call["input"]).replace("{python}", PYTHON)),
        }
        for n, call in enumerate(entry["tool_calls"])
    ]
    return message_response(blocks, stop_reason="tool_use")


@pytest.fixture
def project(tmp_path: Path, fake_api: FakeAPI, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-real")
    root = tmp_path / "project"
    prepare(root)
    path = root / "soda.toml"
    text = path.read_text()
    for old, new in [
        ('provider = "scripted"', 'provider = "anthropic"'),
        ('strong = "scripted"', 'strong = "claude-sonnet-4-6"'),
        ('fast = "scripted"', 'fast = "claude-sonnet-4-6"'),
        ("# base_url = (not set)", f'base_url = "{fake_api.url}"'),
        ("max_retries = 4", "max_retries = 0"),
        ("max_turns = 40", "max_turns = 2"),
    ]:
        assert old in text
        text = text.replace(old, new)
    path.write_text(text)
    return root


def run_once(root: Path):
    session = Session.open(load(root / "soda.toml"))
    return run_loop(session, [].append, once=True), session


def test_an_agent_that_gives_up_ends_the_iteration_without_a_halt(
    project: Path, fake_api: FakeAPI
) -> None:
    read = wire(DEMO[10])  # the verifier reads a file, turn after turn
    fake_api.enqueue(read, read, read)
    result, session = run_once(project)
    assert result.ending is Ending.TRANSIENT
    assert "turn limit: agent verifier did not submit" in result.reason
    assert session.db["halts"].count == 0
    row = next(iter(session.db["iterations"].rows))
    assert row["outcome"] == "transient" and row["decision"] is None


def test_an_executor_out_of_turns_gives_up_its_task_and_the_iteration_goes_on(
    project: Path, fake_api: FakeAPI
) -> None:
    # Verifier, assessor and planner as in the demo; the executor runs two
    # commands and then, on its last turn, edits instead of submitting.
    fake_api.enqueue(*(wire(entry) for entry in DEMO[:7]), wire(DEMO[7]))
    result, session = run_once(project)
    assert result.ending is Ending.CONTINUE
    assert session.db["halts"].count == 0
    row = next(iter(session.db["iterations"].rows))
    assert row["outcome"] is not None and row["outcome"] != "transient"
    failed = [
        json.loads(row[0])
        for row in session.db.execute("SELECT data_json FROM events WHERE kind = 'act.task.failed'")
    ]
    [gave_up] = [data for data in failed if data["status"] == "gave_up"]
    assert gave_up["preview"].startswith("gave up: turn limit")
