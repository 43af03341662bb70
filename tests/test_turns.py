"""Turns the way models work: the model chooses its tool (auto) except where an
answer is due, extended thinking for the strong tier on Anthropic, a turn's other
calls run before its `submit`, and one second chance for a schema slip (an
answer that breaks its contract, arguments that are not JSON).

Through the real providers against the local servers (tests/fakeapi.py,
tests/fakeopenai.py), and FunctionModel with the real worktree tools."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from soda.agent.definition import load_agent
from soda.agent.recorder import CallRecorder
from soda.agent.runtime import AgentRunner
from soda.config import Config, ModelConfig
from soda.contracts import Assessment, ExecuteResult, PlanningChoice
from soda.errors import ContractViolation, ModelStopped
from soda.events import Events
from soda.llm.anthropic import AnthropicModel
from soda.llm.base import Model, ModelRequest, ToolSpec
from soda.llm.function import FunctionModel, Reply, first_turn, last_results, submit
from soda.llm.openai_compat import OpenAICompatModel
from soda.store import Database, open_db
from soda.system.jail import Jail
from soda.tools import Sandbox, worktree_tools
from tests.fakeapi import FakeAPI, message_response, text_response, tool_use_response
from tests.fakeopenai import completion, json_reply, tool_call_reply

pytest_plugins = ("tests.fakeapi", "tests.fakeopenai")

ASSESSMENT = {
    "spec_satisfied": False,
    "confidence": "high",
    "gaps": [{"description": "divide is missing", "severity": "blocking"}],
    "summary": "not yet",
}
ASSESSOR_INPUTS = {"spec": "# Spec", "claims": {"x": 1}, "verification": "ok"}
EXECUTOR_INPUTS = {name: f"({name})" for name in load_agent("executor").inputs}
DONE = {
    "tasks_blocked": [],
    "task_comments": [],
    "new_subtasks": [],
    "learnings": [],
    "summary": "fixed add",
}


class Echo:
    """One tool, `echo`, answering "echoed"."""

    def specs(self) -> list[ToolSpec]:
        schema = {"type": "object", "properties": {}, "additionalProperties": False}
        return [ToolSpec("echo", "echo", schema)]

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        return SimpleNamespace(content="echoed", is_error=False)


@pytest.fixture
def db(tmp_path: Path) -> Database:
    return open_db(tmp_path / "soda.db")


def runner(db: Database, model: Model, config: Config) -> AgentRunner:
    return AgentRunner(model, config, CallRecorder(db, config, model.provider, Events(db)))


def anthropic(db: Database, fake_api: FakeAPI, **settings: Any) -> AgentRunner:
    base = {"base_url": fake_api.url, "max_retries": 0, "read_timeout": 5.0, "max_tokens": 1000}
    config = Config(model=ModelConfig(**(base | settings)))
    return runner(db, AnthropicModel(config.model, lambda kind, data: None), config)


def openai(db: Database, fake_openai: FakeAPI, **settings: Any) -> AgentRunner:
    base = {
        "provider": "openai",
        "base_url": f"{fake_openai.url}/v1",
        "strong": "qwen2.5-coder:32b",
        "fast": "qwen2.5-coder:32b",
        "max_retries": 0,
        "max_tokens": 1000,
    }
    config = Config(model=ModelConfig(**(base | settings)))
    return runner(db, OpenAICompatModel(config.model, lambda kind, data: None), config)


def bodies(fake: FakeAPI) -> list[dict[str, Any]]:
    return [sent.body for sent in fake.requests]


def soft_failures(db: Database) -> list[dict[str, Any]]:
    rows = db.execute("SELECT data_json FROM events WHERE kind = 'agent.soft_failure' ORDER BY id")
    return [json.loads(row[0]) for row in rows]


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")


# --- tool choice: auto, except where an answer is due ---------------------------------


def test_anthropic_tool_choice_is_auto_until_an_answer_is_due(
    db: Database, fake_api: FakeAPI, key: None
) -> None:
    fake_api.enqueue(
        text_response("Let me think about the spec before I look."),  # no call: a reminder
        tool_use_response("echo", {}, text="Now I look."),  # forced: some tool
        tool_use_response("submit", ASSESSMENT),  # past max_turns: the answer alone
    )
    answer = anthropic(db, fake_api, max_turns=2).run(
        load_agent("assessor", Assessment), ASSESSOR_INPUTS, Echo()
    )
    assert answer.value.summary == "not yet" and answer.turns == 3
    choices = [body["tool_choice"] for body in bodies(fake_api)]
    assert choices == [{"type": "auto"}, {"type": "any"}, {"type": "tool", "name": "submit"}]
    reminded = bodies(fake_api)[1]["messages"]
    assert reminded[1]["content"][0]["text"] == "Let me think about the spec before I look."
    assert "without calling a tool" in reminded[-1]["content"][-1]["text"]
    assert [f["failure"] for f in soft_failures(db)] == ["no_tool_call", "turn_limit"]


def test_openai_tool_choice_is_auto_until_an_answer_is_due(
    db: Database, fake_openai: FakeAPI
) -> None:
    fake_openai.enqueue(
        completion({"role": "assistant", "content": "I should read first."}),
        tool_call_reply("echo", {}),
        tool_call_reply("submit", ASSESSMENT),
    )
    openai(db, fake_openai, max_turns=2).run(load_agent("assessor"), ASSESSOR_INPUTS, Echo())
    choices = [body["tool_choice"] for body in bodies(fake_openai)]
    assert choices == ["auto", "required", {"type": "function", "function": {"name": "submit"}}]


# --- extended thinking: the strong tier, on auto turns only ---------------------------

THINKING = {"type": "thinking", "thinking": "The spec wants divide.", "signature": "sig-1"}


def test_thinking_is_sent_on_auto_turns_and_kept_in_the_conversation(
    db: Database, fake_api: FakeAPI, key: None
) -> None:
    call = {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {}}
    fake_api.enqueue(
        message_response([THINKING, call], stop_reason="tool_use"),
        tool_use_response("submit", ASSESSMENT),  # the forced last turn (max_turns 1)
    )
    anthropic(db, fake_api, max_turns=1, thinking=2048).run(
        load_agent("assessor"), ASSESSOR_INPUTS, Echo()
    )
    first, last = bodies(fake_api)
    assert first["tool_choice"] == {"type": "auto"}
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert first["max_tokens"] == 1000 + 2048  # the answer's own budget on top
    # A forced call rules thinking out; the blocks stay in the conversation, unchanged.
    assert last["tool_choice"] == {"type": "tool", "name": "submit"}
    assert "thinking" not in last and last["max_tokens"] == 1000
    assert last["messages"][1]["role"] == "assistant"
    assert last["messages"][1]["content"][0] == THINKING
    assert last["messages"][1]["content"][1]["type"] == "tool_use"


def test_thinking_is_for_the_strong_tier_and_off_by_default(
    db: Database, fake_api: FakeAPI, key: None
) -> None:
    verification = {
        "checks": [],
        "task_updates": [],
        "learnings": [],
        "learning_verdicts": [],
        "summary": "checked",
    }
    fake_api.enqueue(tool_use_response("submit", verification))
    fast = anthropic(db, fake_api, thinking=2048, fast="claude-haiku-4-5")
    fast.run(load_agent("verifier"), {"spec": "# S", "tests_and_merges": "", "claims": {}}, Echo())
    fake_api.enqueue(tool_use_response("submit", ASSESSMENT))
    anthropic(db, fake_api).run(load_agent("assessor"), ASSESSOR_INPUTS, Echo())
    assert ["thinking" in body for body in bodies(fake_api)] == [False, False]


# --- a turn's other calls run before its submit ----------------------------------------


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    (path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    return path


def tools_in(path: Path) -> Any:
    jail = Jail(mode="none", repo_root=path, git_dir=path / ".git")
    return worktree_tools(Sandbox(path), 10.0, 5000, jail=jail)


def edit(old: str, new: str) -> dict[str, Any]:
    return {"name": "edit_file", "input": {"path": "calc.py", "old": old, "new": new}}


def test_an_edit_and_a_submit_in_one_turn_edit_then_answer(db: Database, worktree: Path) -> None:
    def executor(request: ModelRequest) -> Reply:
        fix = edit("return a - b", "return a + b")
        return {"text": "One line to fix.", "tool_calls": [fix, submit(DONE)["tool_calls"][0]]}

    answer = runner(db, FunctionModel(executor), Config()).run(
        load_agent("executor", ExecuteResult), EXECUTOR_INPUTS, tools_in(worktree)
    )
    assert answer.value.summary == "fixed add" and answer.turns == 1
    assert (worktree / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"


def test_a_submit_beside_a_failed_call_is_refused_naming_it(db: Database, worktree: Path) -> None:
    seen: list[list[str]] = []

    def executor(request: ModelRequest) -> Reply:
        if first_turn(request):  # the edit's old text is wrong: it fails
            return {"tool_calls": [edit("return a-b", "return a + b"), *submit(DONE)["tool_calls"]]}
        seen.append(last_results(request))
        return {"tool_calls": [edit("return a - b", "return a + b"), *submit(DONE)["tool_calls"]]}

    answer = runner(db, FunctionModel(executor), Config()).run(
        load_agent("executor", ExecuteResult), EXECUTOR_INPUTS, tools_in(worktree)
    )
    assert answer.turns == 2 and "return a + b" in (worktree / "calc.py").read_text()
    [(edit_result, refusal)] = seen
    assert "calc.py" in edit_result
    assert refusal.startswith("Your `submit` was not taken: edit_file failed in the same turn")
    assert soft_failures(db) == [
        {"agent": "executor", "failure": "submit_refused", "turn": 1, "failed": ["edit_file"]}
    ]


# --- schema slips: handed back once, structural on a repeat ------------------------------


def test_a_contract_violation_goes_back_once_naming_the_path(db: Database) -> None:
    seen: list[str] = []

    def assessor(request: ModelRequest) -> Reply:
        if first_turn(request):
            return submit({**ASSESSMENT, "confidence": "moderate"})
        seen.extend(last_results(request))
        return submit(ASSESSMENT)

    answer = runner(db, FunctionModel(assessor), Config()).run(
        load_agent("assessor", Assessment), ASSESSOR_INPUTS, None
    )
    assert answer.value.confidence == "high" and answer.turns == 2
    [said] = seen
    assert "at $.confidence it breaks the rule 'enum'" in said and "'moderate'" in said
    assert soft_failures(db) == [
        {
            "agent": "assessor",
            "failure": "contract_violation",
            "turn": 1,
            "tool": "submit",
            "path": "$.confidence",
            "rule": "enum",
        }
    ]


def test_a_second_contract_violation_is_structural(db: Database) -> None:
    model = FunctionModel(lambda request: submit({**ASSESSMENT, "confidence": "moderate"}))
    with pytest.raises(ContractViolation) as caught:
        runner(db, model, Config()).run(load_agent("assessor"), ASSESSOR_INPUTS, None)
    assert caught.value.violation.path == "$.confidence" and model.calls == 2


def broken_call(name: str, arguments: str) -> Any:
    call = {"id": "call_x", "type": "function", "function": {"name": name, "arguments": arguments}}
    return completion({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls")


def test_arguments_that_are_not_json_go_back_once(db: Database, fake_openai: FakeAPI) -> None:
    fake_openai.enqueue(broken_call("echo", '{"path": '), tool_call_reply("submit", ASSESSMENT))
    answer = openai(db, fake_openai).run(load_agent("assessor"), ASSESSOR_INPUTS, Echo())
    assert answer.turns == 2
    handed_back = bodies(fake_openai)[1]["messages"][-1]
    assert handed_back["role"] == "tool" and handed_back["tool_call_id"] == "call_x"
    assert handed_back["content"].startswith("ERROR: Your arguments to echo could not be read")
    [slip] = soft_failures(db)
    assert (slip["failure"], slip["tool"]) == ("invalid_arguments", "echo")


def test_arguments_that_are_not_json_twice_are_structural(
    db: Database, fake_openai: FakeAPI
) -> None:
    fake_openai.enqueue(broken_call("echo", "{oops"), broken_call("submit", "not json"))
    with pytest.raises(ModelStopped) as caught:
        openai(db, fake_openai).run(load_agent("assessor"), ASSESSOR_INPUTS, Echo())
    assert caught.value.reason == "invalid_json" and len(fake_openai.requests) == 2


def test_a_json_mode_answer_that_is_not_json_goes_back_as_text(
    db: Database, fake_openai: FakeAPI
) -> None:
    fake_openai.enqueue(
        completion({"role": "assistant", "content": "Sure! multi_task: yes"}),
        json_reply({"multi_task": True, "reason": "four spec items"}),
    )
    answer = openai(db, fake_openai).run(
        load_agent("planning_mode", PlanningChoice), {"spec": "# S", "work": {}}, None
    )
    assert answer.value.multi_task is True
    second = bodies(fake_openai)[1]
    assert "tools" not in second and "response_format" in second
    said, feedback = second["messages"][-2:]
    assert said == {"role": "assistant", "content": "Sure! multi_task: yes"}
    assert feedback["role"] == "user" and "could not be read" in feedback["content"]
