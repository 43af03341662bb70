"""The prompt order and cache markers, as the local Messages-API server receives
them: stable first (tools, system, the spec), this iteration's claims last; a
marker at the end of the stable part and a rolling one on the latest turn, never
more than four; and with the server's simulated cache, a second iteration reads
the stable part back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from soda.agent.definition import first_message, load_agent, terminal_tools
from soda.config import ModelConfig
from soda.llm.anthropic import AnthropicModel
from soda.llm.base import Message, ModelRequest, ToolCall, ToolResult, ToolSpec, ignore_event
from soda.loop.sense import sense
from tests.fakeapi import FakeAPI, tool_use_response
from tests.test_sense import setup

pytest_plugins = ("tests.fakeapi",)

EPHEMERAL = {"type": "ephemeral"}
READ_FILE = ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {}})
SPEC = "# Calculator\n\n" + "The calculator must subtract and divide. " * 200


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-real")


def markers(body: dict[str, Any]) -> list[str]:
    """Where the cache markers are: 'tools', 'system', or 'message N block M'."""
    found = ["tools" for tool in body.get("tools", []) if "cache_control" in tool]
    found += ["system" for block in body.get("system", []) if "cache_control" in block]
    for n, message in enumerate(body["messages"]):
        found += [
            f"message {n} block {m}"
            for m, block in enumerate(message["content"])
            if "cache_control" in block
        ]
    return found


def verifier_request(inputs: dict[str, Any], messages: list[Message] | None = None) -> ModelRequest:
    agent = load_agent("verifier")
    return ModelRequest(
        agent="verifier",
        model="claude-sonnet-4-6",
        system=agent.system,
        messages=messages or [first_message(agent, inputs)],
        # A working tool besides submit: tool mode, as a real agent runs.
        tools=[READ_FILE, *terminal_tools(agent)],
        answer_tool="submit",
    )


def test_claims_come_after_the_spec_and_the_stable_part_is_marked(
    repo: Path, tmp_path: Path, fake_api: FakeAPI
) -> None:
    inp, _ = setup(repo, tmp_path, commits=2)
    claims = sense(inp)
    model = AnthropicModel(ModelConfig(base_url=fake_api.url), ignore_event)
    fake_api.enqueue(tool_use_response("submit", {"x": 1}))
    model.complete(verifier_request({"spec": SPEC, "claims": claims}))
    body = fake_api.requests[0].body
    stable, volatile = body["messages"][0]["content"]
    assert stable["text"].startswith("## Spec") and SPEC.strip() in stable["text"]
    assert stable["cache_control"] == EPHEMERAL
    assert volatile["text"].startswith("## Claims") and volatile["cache_control"] == EPHEMERAL
    # No volatile value in the stable part: no SHA, no iteration counter.
    assert claims.code.head[:10] not in stable["text"] and "iteration 1" not in stable["text"]
    assert claims.code.head[:10] in volatile["text"]
    assert claims.code.head not in volatile["text"]  # short SHAs only
    assert markers(body) == ["tools", "system", "message 0 block 0", "message 0 block 1"]


def test_a_tool_loop_moves_the_rolling_marker_and_stays_within_four(fake_api: FakeAPI) -> None:
    model = AnthropicModel(ModelConfig(base_url=fake_api.url), ignore_event)
    first = first_message(load_agent("verifier"), {"spec": SPEC, "claims": {"head": "abc"}})
    conversation = [first]
    for n in range(3):
        call = ToolCall(f"toolu_{n}", "submit", {"x": n})
        conversation += [
            Message("assistant", tool_calls=[call]),
            Message("user", tool_results=[ToolResult(call.id, f"result {n}")]),
        ]
    fake_api.enqueue(tool_use_response("submit", {"x": 1}))
    model.complete(verifier_request({}, conversation))
    body = fake_api.requests[0].body
    assert markers(body) == ["tools", "system", "message 0 block 0", "message 6 block 0"]


def test_the_next_iteration_reads_the_stable_part_from_the_cache(
    repo: Path, tmp_path: Path, fake_api: FakeAPI
) -> None:
    fake_api.simulate_cache = True
    inp, _ = setup(repo, tmp_path, commits=2)
    model = AnthropicModel(ModelConfig(base_url=fake_api.url), ignore_event)
    usages = []
    for number in (1, 2):
        claims = sense(inp.__class__(**{**inp.__dict__, "iteration": number}))
        fake_api.enqueue(tool_use_response("submit", {"x": 1}))
        usages.append(model.complete(verifier_request({"spec": SPEC, "claims": claims})).usage)
    first, second = usages
    assert first.cache_read_tokens == 0 and first.cache_creation_tokens > 0
    # The second iteration's claims differ (the iteration number), the rest is read.
    assert second.cache_read_tokens > 0.8 * (
        second.input_tokens + second.cache_creation_tokens + second.cache_read_tokens
    )
    assert second.cache_creation_tokens > 0  # its claims were written after the spec
