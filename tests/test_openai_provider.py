"""The OpenAI-compatible provider against a local chat-completions server: wire
shape, structured answers, and the same faults as the Anthropic provider."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import pytest

from soda.config import ModelConfig
from soda.errors import (
    ConfigError,
    CredentialsError,
    ModelStopped,
    PromptTooLong,
    StructuralError,
    TransientError,
)
from soda.llm.base import Message, ModelRequest, ToolCall, ToolResult, ToolSpec
from soda.llm.openai_compat import OpenAICompatModel
from tests.fakeapi import FakeAPI, drop, garbage, stall, truncated
from tests.fakeopenai import (
    completion,
    context_exceeded_reply,
    error_reply,
    json_reply,
    length_reply,
    refusal_reply,
    tool_call_reply,
)

pytest_plugins = ("tests.fakeopenai",)

SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
    "additionalProperties": False,
}
SUBMIT = ToolSpec("submit", "answer", SCHEMA)
READ = ToolSpec(
    "read_file", "read", {"type": "object", "properties": {}, "additionalProperties": False}
)


def request(*tools: ToolSpec, messages: list[Message] | None = None) -> ModelRequest:
    return ModelRequest(
        agent="verifier",
        model="qwen-local",
        system="be brief",
        messages=messages or [Message(role="user", text="hello")],
        tools=list(tools) or [SUBMIT],
        answer_tool="submit",
        max_tokens=256,
    )


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.waits: list[float] = []

    def emit(self, kind: str, data: dict[str, Any]) -> None:
        self.events.append((kind, data))

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)


def model(
    fake: FakeAPI, rec: Recorder, real_sleep: bool = False, **overrides: Any
) -> OpenAICompatModel:
    config = ModelConfig(
        provider="openai", base_url=f"{fake.url}/v1", max_retries=3, max_retry_wait=10, **overrides
    )
    if real_sleep:
        return OpenAICompatModel(config, rec.emit)
    return OpenAICompatModel(config, rec.emit, sleep=rec.sleep)


def test_tool_call_and_request_shape(fake_openai: FakeAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    rec = Recorder()
    fake_openai.enqueue(tool_call_reply("read_file", {}, prompt_tokens=300, cached_tokens=200))
    history = [
        Message(role="user", text="hello"),
        Message(role="assistant", tool_calls=[ToolCall("c1", "read_file", {})]),
        Message(role="user", tool_results=[ToolResult("c1", "no such file", is_error=True)]),
    ]
    response = model(fake_openai, rec, api_key_env="OPENAI_API_KEY").complete(
        request(READ, SUBMIT, messages=history)
    )
    assert [(c.name, c.input) for c in response.tool_calls] == [("read_file", {})]
    assert (response.usage.input_tokens, response.usage.cache_read_tokens) == (100, 200)
    sent = fake_openai.requests[0]
    assert sent.headers["authorization"] == "Bearer sk-local"
    body = sent.body
    assert body["tool_choice"] == "auto"  # forced only where an answer is due
    assert body["tools"][1]["function"]["strict"] is True
    assert body["messages"][0] == {"role": "system", "content": "be brief"}
    assert body["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "ERROR: no such file",
    }


def test_json_schema_answer_when_only_the_answer_tool(fake_openai: FakeAPI) -> None:
    fake_openai.enqueue(json_reply({"ok": True}))
    response = model(fake_openai, Recorder()).complete(request())
    assert [(c.name, c.input) for c in response.tool_calls] == [("submit", {"ok": True})]
    body = fake_openai.requests[0].body
    assert body["response_format"]["json_schema"]["schema"] == SCHEMA
    assert "tools" not in body


def test_two_503s_then_success(fake_openai: FakeAPI) -> None:
    rec = Recorder()
    fake_openai.enqueue(
        error_reply(503, "busy"), error_reply(503, "busy"), json_reply({"ok": True})
    )
    model(fake_openai, rec).complete(request())
    assert [kind for kind, _ in rec.events] == ["provider.retry", "provider.retry"]
    assert len(fake_openai.requests) == 3


def test_429_retry_after_waits_about_a_second(fake_openai: FakeAPI) -> None:
    fake_openai.enqueue(
        error_reply(429, "slow down", {"retry-after": "1"}), json_reply({"ok": True})
    )
    started = time.monotonic()
    model(fake_openai, Recorder(), real_sleep=True).complete(request())
    assert 0.9 <= time.monotonic() - started < 5


@pytest.mark.parametrize(
    "fault",
    [stall(3.0), drop(), truncated(json_reply({"ok": True}))],
    ids=["stall", "drop", "truncated"],
)
def test_transport_faults_are_retried(fake_openai: FakeAPI, fault: Any) -> None:
    rec = Recorder()
    fake_openai.enqueue(fault, json_reply({"ok": True}))
    response = model(fake_openai, rec, read_timeout=0.5).complete(request())
    assert response.tool_calls[0].input == {"ok": True}
    assert len(rec.events) == 1


def test_budget_exhausted_is_transient(fake_openai: FakeAPI) -> None:
    fake_openai.enqueue(*[error_reply(500, "down")] * 4)
    with pytest.raises(TransientError, match="gave up after"):
        model(fake_openai, Recorder()).complete(request())


def test_refusal_is_structural(fake_openai: FakeAPI) -> None:
    fake_openai.enqueue(refusal_reply())
    with pytest.raises(ModelStopped) as info:
        model(fake_openai, Recorder()).complete(request())
    assert info.value.reason == "refusal"


def test_length_is_truncated_without_the_cut_call(fake_openai: FakeAPI) -> None:
    whole = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    cut = {"id": "c2", "type": "function", "function": {"name": "read_file", "arguments": '{"pa'}}
    fake_openai.enqueue(
        length_reply(),
        completion({"role": "assistant", "content": None, "tool_calls": [whole, cut]}, "length"),
    )
    answer = model(fake_openai, Recorder()).complete(request())
    assert answer.truncated and answer.tool_calls == []
    calls = model(fake_openai, Recorder()).complete(request(READ, SUBMIT))
    assert calls.truncated and [c.id for c in calls.tool_calls] == ["c1"]


def test_context_exceeded_is_prompt_too_long(fake_openai: FakeAPI) -> None:
    fake_openai.enqueue(context_exceeded_reply())
    with pytest.raises(PromptTooLong, match="maximum context length is 4096"):
        model(fake_openai, Recorder()).complete(request())
    assert len(fake_openai.requests) == 1


@pytest.mark.parametrize(
    "reply",
    [
        garbage(b"<html>bad gateway</html>"),
        garbage({"object": "error"}),
        completion({"role": "assistant", "content": '{"ok": true, "note": "\\ud800"}'}),
    ],
    ids=["not-json", "no-choices", "surrogate"],
)
def test_unreadable_200_is_retried(fake_openai: FakeAPI, reply: Any) -> None:
    rec = Recorder()
    fake_openai.enqueue(reply, json_reply({"ok": True}))
    response = model(fake_openai, rec).complete(request())
    assert response.tool_calls[0].input == {"ok": True}
    assert [kind for kind, _ in rec.events] == ["provider.retry"]


def test_a_single_forced_tool_is_named_in_tool_choice(fake_openai: FakeAPI) -> None:
    fake_openai.enqueue(tool_call_reply("submit", {"ok": True}))
    forced = replace(request(READ, SUBMIT), must_call=("submit",))
    model(fake_openai, Recorder()).complete(forced)
    body = fake_openai.requests[0].body
    assert body["tool_choice"] == {"type": "function", "function": {"name": "submit"}}


def test_401_names_the_key_variable(fake_openai: FakeAPI) -> None:
    fake_openai.enqueue(error_reply(401, "bad key"))
    with pytest.raises(CredentialsError, match="LOCAL_KEY"):
        model(fake_openai, Recorder(), api_key_env="LOCAL_KEY").complete(request())


def test_400_is_not_retried(fake_openai: FakeAPI) -> None:
    fake_openai.enqueue(error_reply(400, "unknown model"))
    with pytest.raises(StructuralError, match="unknown model"):
        model(fake_openai, Recorder()).complete(request())
    assert len(fake_openai.requests) == 1


def test_missing_base_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="model.base_url"):
        OpenAICompatModel(ModelConfig(provider="openai"), Recorder().emit)
