"""AnthropicModel end to end: the real SDK client against the local fake Messages API.

Nothing of ours is mocked. Retry waits go through an injected sleep that only
records them, except in the one test that measures a real retry-after wait.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import replace
from typing import Any

import pytest

from soda.config import ModelConfig
from soda.errors import (
    CredentialsError,
    ModelStopped,
    PromptTooLong,
    StructuralError,
    TransientError,
)
from soda.llm.anthropic import AnthropicModel, retry_after
from soda.llm.base import Message, ModelRequest, ToolCall, ToolResult, ToolSpec
from tests.fakeapi import (
    FakeAPI,
    api_key_of,
    bad_request,
    drop,
    error_response,
    garbage,
    json_response,
    max_tokens_response,
    message_response,
    overloaded,
    prompt_too_long,
    rate_limited,
    refusal_response,
    stall,
    surrogate_response,
    text_response,
    tool_use_response,
    truncated,
    unauthorized,
    usage,
)

pytest_plugins = ("tests.fakeapi",)  # the fake_api fixture

KEY = "sk-ant-test-not-a-real-key"
EPHEMERAL = {"type": "ephemeral"}
READ_FILE = ToolSpec(
    "read_file",
    "Read a file of the repository.",
    {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
        "additionalProperties": False,
    },
)
SUBMIT = ToolSpec(
    "submit",
    "Give the verdict.",
    {
        "type": "object",
        "properties": {"verdict": {"type": "string", "enum": ["pass", "fail"]}},
        "required": ["verdict"],
        "additionalProperties": False,
    },
)


class Events:
    """An EventSink that keeps what it is given."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        self.seen.append((kind, data))

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [data for seen_kind, data in self.seen if seen_kind == kind]


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


@pytest.fixture
def events() -> Events:
    return Events()


@pytest.fixture
def waits() -> list[float]:
    return []


def config_for(fake: FakeAPI, **overrides: Any) -> ModelConfig:
    settings: dict[str, Any] = {
        "base_url": fake.url,
        "connect_timeout": 2.0,
        "read_timeout": 2.0,
        "max_retries": 3,
        "max_retry_wait": 30.0,
    }
    return ModelConfig(**(settings | overrides))


@pytest.fixture
def model(fake_api: FakeAPI, events: Events, waits: list[float]) -> AnthropicModel:
    return AnthropicModel(config_for(fake_api), events, sleep=waits.append)


def ask(
    tools: list[ToolSpec] | None = None,
    messages: list[Message] | None = None,
    model: str = "claude-sonnet-4-6",
) -> ModelRequest:
    return ModelRequest(
        agent="verifier",
        model=model,
        system="You verify claims.",
        messages=messages or [Message("user", "Spec and claims go here.")],
        tools=[READ_FILE, SUBMIT] if tools is None else tools,
        answer_tool="submit",
        max_tokens=1000,
    )


# Answers and the request on the wire


def test_tool_call_is_parsed_with_usage_and_cache_tokens(
    model: AnthropicModel, fake_api: FakeAPI
) -> None:
    tokens = usage(120, 30, cache_creation_input_tokens=2000, cache_read_input_tokens=900)
    fake_api.enqueue(
        tool_use_response(
            "read_file", {"path": "calc.py"}, id="toolu_1", text="Looking.", tokens=tokens
        )
    )
    response = model.complete(ask())
    assert response.tool_calls == [ToolCall("toolu_1", "read_file", {"path": "calc.py"})]
    assert response.text == "Looking."
    assert response.stop_reason == "tool_use"
    assert response.model == "claude-sonnet-4-6"
    usage_ = response.usage
    assert (usage_.input_tokens, usage_.output_tokens) == (120, 30)
    assert (usage_.cache_creation_tokens, usage_.cache_read_tokens) == (2000, 900)
    assert response.raw["usage"]["cache_read_input_tokens"] == 900
    assert response.raw["content"][1]["type"] == "tool_use"
    assert response.latency_ms >= 0


def test_request_marks_the_stable_prefix_and_lets_the_model_choose(
    model: AnthropicModel, fake_api: FakeAPI
) -> None:
    fake_api.enqueue(tool_use_response("submit", {"verdict": "pass"}))
    model.complete(ask())
    [sent] = fake_api.requests
    body = sent.body
    assert api_key_of(sent.headers) == KEY
    assert body["model"] == "claude-sonnet-4-6" and body["max_tokens"] == 1000
    assert body["system"] == [
        {"type": "text", "text": "You verify claims.", "cache_control": EPHEMERAL}
    ]
    assert [tool["name"] for tool in body["tools"]] == ["read_file", "submit"]
    assert all(tool["strict"] is True for tool in body["tools"])
    assert body["tools"][1]["input_schema"] == SUBMIT.input_schema
    assert "cache_control" not in body["tools"][0]
    assert body["tools"][-1]["cache_control"] == EPHEMERAL
    assert body["tool_choice"] == {"type": "auto"}  # forced only where an answer is due
    assert "output_config" not in body and "thinking" not in body
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Spec and claims go here.", "cache_control": EPHEMERAL}
            ],
        }
    ]


def test_conversation_turns_map_to_tool_use_and_tool_result_blocks(
    model: AnthropicModel, fake_api: FakeAPI
) -> None:
    fake_api.enqueue(tool_use_response("submit", {"verdict": "fail"}))
    conversation = [
        Message("user", "Spec and claims."),
        Message(
            "assistant",
            "Reading two files.",
            tool_calls=[
                ToolCall("toolu_a", "read_file", {"path": "a.py"}),
                ToolCall("toolu_b", "read_file", {"path": "missing.py"}),
            ],
        ),
        Message(
            "user",
            tool_results=[
                ToolResult("toolu_a", "print('a')"),
                ToolResult("toolu_b", "no such file", is_error=True),
            ],
        ),
    ]
    model.complete(ask(messages=conversation))
    first, assistant, results = fake_api.requests[0].body["messages"]
    assert first["content"][-1]["cache_control"] == EPHEMERAL
    assert assistant == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Reading two files."},
            {"type": "tool_use", "id": "toolu_a", "name": "read_file", "input": {"path": "a.py"}},
            {
                "type": "tool_use",
                "id": "toolu_b",
                "name": "read_file",
                "input": {"path": "missing.py"},
            },
        ],
    }
    assert results == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_a",
                "content": "print('a')",
                "is_error": False,
            },
            {
                "type": "tool_result",
                "tool_use_id": "toolu_b",
                "content": "no such file",
                "is_error": True,
                "cache_control": EPHEMERAL,  # the rolling marker on the latest turn
            },
        ],
    }


def test_answer_tool_alone_uses_json_schema_output(
    model: AnthropicModel, fake_api: FakeAPI
) -> None:
    fake_api.enqueue(json_response({"verdict": "pass"}))
    response = model.complete(ask(tools=[SUBMIT]))
    assert response.tool_calls == [ToolCall("answer", "submit", {"verdict": "pass"})]
    body = fake_api.requests[0].body
    assert body["output_config"] == {
        "format": {"type": "json_schema", "schema": SUBMIT.input_schema}
    }
    assert "tools" not in body and "tool_choice" not in body
    assert body["system"][0]["cache_control"] == EPHEMERAL


def test_json_mode_sends_an_earlier_answer_back_as_text(
    model: AnthropicModel, fake_api: FakeAPI
) -> None:
    fake_api.enqueue(json_response({"verdict": "fail"}))
    conversation = [
        Message("user", "Spec."),
        Message("assistant", tool_calls=[ToolCall("answer", "submit", {"verdict": "maybe"})]),
        Message(
            "user", tool_results=[ToolResult("answer", "verdict: not one of pass, fail", True)]
        ),
    ]
    model.complete(ask(tools=[SUBMIT], messages=conversation))
    wire = fake_api.requests[0].body["messages"]
    assert wire[1]["content"] == [{"type": "text", "text": '{"verdict": "maybe"}'}]
    feedback = {"type": "text", "text": "verdict: not one of pass, fail"}
    assert wire[2]["content"] == [{**feedback, "cache_control": EPHEMERAL}]  # the latest turn


def test_invalid_json_answer_comes_back_unreadable_not_retried(
    model: AnthropicModel, fake_api: FakeAPI
) -> None:
    """Not a stop: the runtime hands the slip back to the model once."""
    fake_api.enqueue(text_response('{"verdict": "pa'))
    response = model.complete(ask(tools=[SUBMIT]))
    [answer] = response.tool_calls
    assert answer.name == "submit" and answer.input == {}
    assert answer.unreadable is not None and answer.unreadable.startswith("not valid JSON")
    assert response.text == '{"verdict": "pa'
    assert len(fake_api.requests) == 1


def test_answer_tool_missing_from_tools_is_structural(model: AnthropicModel) -> None:
    with pytest.raises(StructuralError, match="answer tool 'submit' is not among its tools"):
        model.complete(ask(tools=[READ_FILE]))


def test_client_has_explicit_timeouts_and_no_sdk_retries(fake_api: FakeAPI, events: Events) -> None:
    config = config_for(fake_api, connect_timeout=3.0, read_timeout=45.0)
    client = AnthropicModel(config, events).client
    assert (client.timeout.connect, client.timeout.read) == (3.0, 45.0)
    assert (client.timeout.write, client.timeout.pool) == (3.0, 3.0)
    assert client.max_retries == 0
    assert str(client.base_url).rstrip("/") == fake_api.url


def test_sdk_does_not_retry_on_its_own(fake_api: FakeAPI, events: Events) -> None:
    fake_api.enqueue(overloaded())
    model = AnthropicModel(config_for(fake_api, max_retries=0), events)
    with pytest.raises(TransientError, match="gave up after 1 attempt"):
        model.complete(ask())
    assert len(fake_api.requests) == 1


def test_default_model_ids_are_not_deprecated(fake_api: FakeAPI, events: Events) -> None:
    defaults = ModelConfig()
    model = AnthropicModel(config_for(fake_api), events)
    fake_api.enqueue(*(tool_use_response("submit", {"verdict": "pass"}) for _ in range(3)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.complete(ask(model=defaults.strong))
        model.complete(ask(model=defaults.fast))
        # The same check sees the warning for a model the SDK knows is deprecated.
        model.complete(ask(model="claude-sonnet-4-5"))
    deprecated = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assert not [m for m in deprecated if defaults.strong in m or defaults.fast in m]
    assert any("claude-sonnet-4-5" in m for m in deprecated)


# Transient failures: retried here, never by the SDK


def test_two_overloaded_then_success_retries_twice(
    model: AnthropicModel, fake_api: FakeAPI, events: Events, waits: list[float]
) -> None:
    fake_api.enqueue(overloaded(), overloaded(), tool_use_response("submit", {"verdict": "pass"}))
    response = model.complete(ask())
    assert response.tool_calls[0].name == "submit"
    retries = events.of("provider.retry")
    assert [retry["attempt"] for retry in retries] == [1, 2]
    assert "HTTP 529 overloaded_error" in retries[0]["reason"]
    assert len(waits) == 2 and len(fake_api.requests) == 3


@pytest.mark.parametrize(
    ("status", "error_type"),
    [(408, "timeout_error"), (409, "conflict"), (500, "api_error"), (503, "api_error")],
)
def test_retryable_statuses(
    model: AnthropicModel, fake_api: FakeAPI, events: Events, status: int, error_type: str
) -> None:
    fake_api.enqueue(
        error_response(status, error_type, "try again"),
        tool_use_response("submit", {"verdict": "pass"}),
    )
    assert model.complete(ask()).tool_calls[0].name == "submit"
    [retry] = events.of("provider.retry")
    assert f"HTTP {status} {error_type}: try again" in retry["reason"]


def test_retry_after_header_sets_the_real_wait(fake_api: FakeAPI, events: Events) -> None:
    model = AnthropicModel(config_for(fake_api), events)  # real time.sleep
    fake_api.enqueue(rate_limited(retry_after=1), tool_use_response("submit", {"verdict": "pass"}))
    started = time.monotonic()
    model.complete(ask())
    elapsed = time.monotonic() - started
    assert 0.9 <= elapsed < 5
    [retry] = events.of("provider.retry")
    assert retry["wait_seconds"] >= 1.0 and "HTTP 429 rate_limit_error" in retry["reason"]


def test_retry_after_headers_are_read_in_seconds_or_milliseconds() -> None:
    assert retry_after({"retry-after": "3"}) == 3.0
    assert retry_after({"retry-after-ms": "250", "retry-after": "1"}) == 0.25
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) is None
    assert retry_after({}) is None


def test_stalled_response_times_out_and_is_retried(fake_api: FakeAPI, events: Events) -> None:
    model = AnthropicModel(config_for(fake_api, read_timeout=0.5), events, sleep=lambda s: None)
    fake_api.enqueue(stall(3), tool_use_response("submit", {"verdict": "pass"}))
    started = time.monotonic()
    response = model.complete(ask())
    assert response.tool_calls[0].input == {"verdict": "pass"}
    assert time.monotonic() - started < 2.5
    [retry] = events.of("provider.retry")
    assert "timed out" in retry["reason"]


def test_dropped_connection_is_retried(
    model: AnthropicModel, fake_api: FakeAPI, events: Events
) -> None:
    fake_api.enqueue(drop(), tool_use_response("submit", {"verdict": "pass"}))
    assert model.complete(ask()).tool_calls[0].name == "submit"
    [retry] = events.of("provider.retry")
    assert "connection failed" in retry["reason"]


def test_truncated_json_body_is_retried(
    model: AnthropicModel, fake_api: FakeAPI, events: Events
) -> None:
    fake_api.enqueue(
        truncated(tool_use_response("submit", {"verdict": "pass"})),
        tool_use_response("submit", {"verdict": "pass"}),
    )
    assert model.complete(ask()).tool_calls[0].name == "submit"
    [retry] = events.of("provider.retry")
    assert "not valid JSON" in retry["reason"]


def test_retry_budget_exhausted_raises_transient(
    model: AnthropicModel, fake_api: FakeAPI, events: Events
) -> None:
    fake_api.enqueue(*(overloaded() for _ in range(4)))  # max_retries = 3: four attempts
    with pytest.raises(TransientError, match="gave up after 4 attempt") as caught:
        model.complete(ask())
    assert "overloaded_error" in str(caught.value)
    assert len(fake_api.requests) == 4 and fake_api.pending == 0
    assert len(events.of("provider.retry")) == 3


# The model stopped without an answer


def test_refusal_is_model_stopped(model: AnthropicModel, fake_api: FakeAPI) -> None:
    fake_api.enqueue(refusal_response("I won't do that."))
    with pytest.raises(ModelStopped, match="I won't do that") as caught:
        model.complete(ask())
    assert caught.value.reason == "refusal"
    assert caught.value.raw["stop_reason"] == "refusal"


def test_max_tokens_in_json_mode_is_truncated_without_an_answer(
    model: AnthropicModel, fake_api: FakeAPI
) -> None:
    fake_api.enqueue(max_tokens_response())
    response = model.complete(ask(tools=[SUBMIT]))
    assert response.truncated and response.tool_calls == []
    assert response.stop_reason == "max_tokens" and len(fake_api.requests) == 1


def test_max_tokens_drops_the_last_tool_call_and_keeps_whole_ones(
    model: AnthropicModel, fake_api: FakeAPI
) -> None:
    whole = {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.py"}}
    cut = {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {}}
    fake_api.enqueue(message_response([whole, cut], stop_reason="max_tokens"))
    response = model.complete(ask())
    assert response.truncated and response.stop_reason == "max_tokens"
    assert response.tool_calls == [ToolCall("toolu_1", "read_file", {"path": "a.py"})]


def test_a_single_forced_tool_is_named_in_tool_choice(
    model: AnthropicModel, fake_api: FakeAPI
) -> None:
    fake_api.enqueue(*(tool_use_response("submit", {"verdict": "pass"}) for _ in range(2)))
    model.complete(replace(ask(), must_call=("submit",)))
    model.complete(replace(ask(), must_call=("submit", "read_file")))
    first, second = (sent.body for sent in fake_api.requests)
    assert first["tool_choice"] == {"type": "tool", "name": "submit"}
    assert [tool["name"] for tool in first["tools"]] == ["read_file", "submit"]
    assert second["tool_choice"] == {"type": "any"}


# A 200 that cannot be read is transient: retried, never a traceback


@pytest.mark.parametrize(
    "reply",
    [
        garbage(),
        garbage(b"\xff\xfe not even utf-8"),
        garbage(b"upstream said no", content_type="text/plain"),
        garbage({"type": "message", "id": "msg_1"}),
        garbage({"type": "message", "content": "not a list of blocks", "usage": None}),
        surrogate_response(),
        tool_use_response("submit", {"verdict": "pass \udc00"}),
    ],
    ids=[
        "html",
        "not-utf8",
        "not-json-content-type",
        "no-content",
        "wrong-types",
        "surrogate-text",
        "surrogate-tool-input",
    ],
)
def test_unreadable_200_is_retried(
    model: AnthropicModel, fake_api: FakeAPI, events: Events, reply: Any
) -> None:
    fake_api.enqueue(reply, tool_use_response("submit", {"verdict": "pass"}))
    response = model.complete(ask())
    assert response.tool_calls[0].input == {"verdict": "pass"}
    assert len(events.of("provider.retry")) == 1 and len(fake_api.requests) == 2


def test_json_answer_spelling_a_lone_surrogate_is_retried(
    model: AnthropicModel, fake_api: FakeAPI, events: Events
) -> None:
    fake_api.enqueue(json_response({"verdict": "\udfff"}), json_response({"verdict": "pass"}))
    assert model.complete(ask(tools=[SUBMIT])).tool_calls[0].input == {"verdict": "pass"}
    [retry] = events.of("provider.retry")
    assert "lone surrogates" in retry["reason"]


def test_unreadable_200s_past_the_budget_are_transient(fake_api: FakeAPI, events: Events) -> None:
    model = AnthropicModel(config_for(fake_api, max_retries=1), events, sleep=lambda s: None)
    fake_api.enqueue(surrogate_response(), garbage())
    with pytest.raises(TransientError, match="gave up after 2 attempt") as caught:
        model.complete(ask())
    assert "not valid JSON" in str(caught.value)
    [retry] = events.of("provider.retry")
    assert "lone surrogates" in retry["reason"]


def test_prompt_too_long_is_its_own_error_and_not_retried(
    model: AnthropicModel, fake_api: FakeAPI
) -> None:
    fake_api.enqueue(prompt_too_long())
    with pytest.raises(PromptTooLong, match="prompt is too long: 215000 tokens"):
        model.complete(ask())
    assert len(fake_api.requests) == 1


def test_unknown_stop_reason_passes_through(model: AnthropicModel, fake_api: FakeAPI) -> None:
    fake_api.enqueue(message_response([{"type": "text", "text": "..."}], stop_reason="pause_turn"))
    assert model.complete(ask()).stop_reason == "pause_turn"


# Refused keys and rejected requests are never retried


def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch, events: Events) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(CredentialsError, match="set the environment variable SODA_TEST_KEY"):
        AnthropicModel(ModelConfig(api_key_env="SODA_TEST_KEY"), events)


@pytest.mark.parametrize("status", [401, 403])
def test_refused_key_is_credentials_error(
    fake_api: FakeAPI, events: Events, monkeypatch: pytest.MonkeyPatch, status: int
) -> None:
    monkeypatch.setenv("SODA_TEST_KEY", "sk-ant-revoked")
    model = AnthropicModel(config_for(fake_api, api_key_env="SODA_TEST_KEY"), events)
    reply = unauthorized() if status == 401 else error_response(403, "permission_error", "no")
    fake_api.enqueue(reply)
    with pytest.raises(CredentialsError, match="check the key in SODA_TEST_KEY"):
        model.complete(ask())
    assert len(fake_api.requests) == 1
    assert api_key_of(fake_api.requests[0].headers) == "sk-ant-revoked"


def test_bad_request_is_structural_and_not_retried(
    model: AnthropicModel, fake_api: FakeAPI, events: Events
) -> None:
    fake_api.enqueue(bad_request("tools.0.input_schema: unsupported keyword"))
    with pytest.raises(StructuralError, match="HTTP 400 invalid_request_error") as caught:
        model.complete(ask())
    assert "tools.0.input_schema: unsupported keyword" in str(caught.value)
    assert len(fake_api.requests) == 1 and events.of("provider.retry") == []


@pytest.mark.parametrize(
    ("status", "error_type"),
    [(404, "not_found_error"), (413, "request_too_large"), (422, "invalid_request_error")],
)
def test_other_client_errors_are_structural(
    model: AnthropicModel, fake_api: FakeAPI, status: int, error_type: str
) -> None:
    fake_api.enqueue(error_response(status, error_type, "nope"))
    with pytest.raises(StructuralError, match=f"HTTP {status} {error_type}: nope"):
        model.complete(ask())
    assert len(fake_api.requests) == 1
