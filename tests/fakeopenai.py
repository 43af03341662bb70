"""A local OpenAI-compatible chat-completions server for tests.

The same server as `tests.fakeapi` (queue of replies, recorded requests, faults:
`stall`, `drop`, `truncated`, `garbage`), serving `POST /v1/chat/completions` with the
OpenAI wire format and error shape. Use it with
`pytest_plugins = ("tests.fakeopenai",)` and the `fake_openai` fixture.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakeapi import FakeAPI, Reply, serve

_ids = itertools.count(1)


@pytest.fixture
def fake_openai() -> Iterator[FakeAPI]:
    """A running fake chat-completions server (local servers need no key)."""
    yield from serve(FakeAPI(path="/v1/chat/completions", require_key=False))


def completion(
    message: dict[str, Any],
    finish_reason: str = "stop",
    prompt_tokens: int = 100,
    completion_tokens: int = 20,
    cached_tokens: int = 0,
) -> Reply:
    return Reply(
        body={
            "id": f"chatcmpl-{next(_ids)}",
            "object": "chat.completion",
            "model": "local-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "prompt_tokens_details": {"cached_tokens": cached_tokens},
            },
        }
    )


def tool_call_reply(name: str, arguments: dict[str, Any], **kwargs: Any) -> Reply:
    call = {
        "id": f"call_{next(_ids)}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return completion(
        {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls", **kwargs
    )


def json_reply(answer: Any) -> Reply:
    return completion({"role": "assistant", "content": json.dumps(answer)})


def refusal_reply() -> Reply:
    return completion({"role": "assistant", "content": None, "refusal": "I can't help with that."})


def length_reply() -> Reply:
    return completion({"role": "assistant", "content": '{"ok": tr'}, "length")


def error_reply(status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
    return Reply(
        status=status,
        body={"error": {"message": message, "type": "error", "code": status}},
        headers=headers or {},
    )


def context_exceeded_reply() -> Reply:
    """vLLM's (and OpenAI's) 400 for a prompt past the context window."""
    return error_reply(
        400,
        "This model's maximum context length is 4096 tokens. However, you requested "
        "5120 tokens (5000 in the messages, 120 in the completion).",
    )
