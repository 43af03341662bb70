"""The OpenAI-compatible provider: soda's `Model` protocol over `POST /chat/completions`.

For local model servers (Ollama, vLLM, llama.cpp's server) and gateways. It is
plain `httpx` rather than the `openai` package: soda needs one endpoint, and
local servers differ enough that a thin, visible mapping is easier to trust than
an SDK's assumptions. Errors are classified exactly as for Anthropic and retried
in one place, `soda.llm.retry`; a 200 whose body is not a readable answer is
transient, a context-length refusal is `PromptTooLong` (or `MaxTokensTooLarge`
when the prompt fits and only max_tokens does not: vLLM counts it inside the
window), an answer cut at the length limit comes back `truncated`, and
arguments that are not JSON come back as a call marked `unreadable`.

Ollama cuts a prompt longer than its num_ctx silently: the answer then counts
far fewer prompt tokens than were sent. Where the server reports a count, such a
shortfall is announced (`provider.prompt_undercounted`); `soda doctor --ping`
probes for it with a request the size of soda's largest.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from typing import Any

import httpx

from soda.config import ModelConfig
from soda.errors import (
    ConfigError,
    CredentialsError,
    ModelStopped,
    StructuralError,
)
from soda.llm.base import (
    EventSink,
    Message,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolSpec,
    Usage,
    has_lone_surrogates,
)
from soda.llm.ratelimits import openai_wait, retry_after
from soda.llm.retry import RetryableError, call_with_retries
from soda.llm.windows import context_refusal

ANSWER_CALL_ID = "answer"
RETRYABLE_STATUS = frozenset({408, 409, 429})
"""Besides every 5xx: timeout, conflict, rate limit."""
REASONING_MODEL = re.compile(r"^(o[134]\b|gpt-?5)")
"""OpenAI's reasoning models, which take max_completion_tokens instead of max_tokens."""
CHARS_PER_TOKEN = 4
UNDERCOUNT_FROM = 1024
"""Estimated prompt tokens from which a server's much lower count is announced."""


class OpenAICompatModel:
    """A Model answered by an OpenAI-compatible chat-completions endpoint."""

    provider = "openai"

    def __init__(
        self,
        config: ModelConfig,
        emit: EventSink,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not config.base_url:
            raise ConfigError(
                'soda.toml: model.base_url: required for provider = "openai" '
                "(e.g. http://127.0.0.1:11434/v1)"
            )
        self.config = config
        self.emit = emit
        self.sleep = sleep
        headers = {"content-type": "application/json"}
        key = os.environ.get(config.api_key_env)
        if key:  # local servers usually need none
            headers["authorization"] = f"Bearer {key}"
        self.client = httpx.Client(
            base_url=config.base_url.rstrip("/"),
            headers=headers,
            timeout=httpx.Timeout(
                connect=config.connect_timeout,
                read=config.read_timeout,
                write=config.read_timeout,
                pool=config.connect_timeout,
            ),
        )

    def complete(self, request: ModelRequest) -> ModelResponse:
        json_mode = _answers_as_json(request)
        body = build_body(request, json_mode)
        emit = request.on_event or self.emit
        describe = f"agent {request.agent} ({request.model})"
        # Reading the answer is part of the attempt: an unreadable 200 is retried.
        response = call_with_retries(
            lambda: to_response(*self._send(body), request, json_mode),
            max_retries=self.config.max_retries,
            max_total_wait=self.config.max_retry_wait,
            emit=emit,
            describe=describe,
            sleep=self.sleep,
        )
        sent = estimated_prompt_tokens(body)
        counted = response.usage.input_tokens + response.usage.cache_read_tokens
        if undercounted(sent, counted):
            emit(
                "provider.prompt_undercounted",
                {"call": describe, "prompt_tokens": counted, "estimated_tokens": sent},
            )
        return response

    def _send(self, body: dict[str, Any]) -> tuple[Any, int]:
        started = time.monotonic()
        try:
            response = self.client.post("/chat/completions", json=body)
        except httpx.TransportError as exc:  # connect, read timeout, dropped connection
            raise RetryableError(f"{type(exc).__name__}: {exc}") from exc
        latency_ms = int((time.monotonic() - started) * 1000)
        if response.status_code >= 400:
            raise self._http_error(response)
        try:
            data = response.json()
        except ValueError as exc:
            raise RetryableError("the response body was not valid JSON (truncated?)") from exc
        return data, latency_ms

    def _http_error(self, response: httpx.Response) -> Exception:
        status = response.status_code
        message = _error_message(response)
        if status == 429:  # a rate limit: its reset may outlast the retry budget
            wait = openai_wait(response.headers)
            return RetryableError(f"HTTP 429: {message}", wait, rate_limited=True)
        if status in RETRYABLE_STATUS or status >= 500:
            return RetryableError(f"HTTP {status}: {message}", retry_after(response.headers))
        if status in (401, 403):
            return CredentialsError(
                f"the model server refused the key (HTTP {status}): check "
                f"{self.config.api_key_env} (model.api_key_env)"
            )
        if status in (400, 413):
            refused = context_refusal(status, message)
            if refused is not None:
                return refused
        return StructuralError(f"the model server rejected the request (HTTP {status}): {message}")


def _answers_as_json(request: ModelRequest) -> bool:
    """With no tools but the answer, ask for JSON output; otherwise require a tool call."""
    return all(tool.name == request.answer_tool for tool in request.tools)


def build_body(request: ModelRequest, json_mode: bool) -> dict[str, Any]:
    answer = next((t for t in request.tools if t.name == request.answer_tool), None)
    if answer is None:
        raise StructuralError(f"request from {request.agent} lacks its answer tool")
    # OpenAI's reasoning models refuse max_tokens; everything else knows it.
    limit = "max_completion_tokens" if reasoning_model(request.model) else "max_tokens"
    body: dict[str, Any] = {
        "model": request.model,
        limit: request.max_tokens,
        "messages": [
            {"role": "system", "content": request.system},
            *wire_messages(request.messages, json_mode),
        ],
    }
    if json_mode:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": answer.name, "schema": answer.input_schema, "strict": True},
        }
    else:
        body["tools"] = [wire_tool(tool) for tool in request.tools]
        body["tool_choice"] = tool_choice(request)
    return body


def tool_choice(request: ModelRequest) -> str | dict[str, Any]:
    """The model's choice (auto), unless the turn must be a call: the one function
    named, or some function (required)."""
    if len(request.must_call) == 1:
        return {"type": "function", "function": {"name": request.must_call[0]}}
    return "required" if request.must_call else "auto"


def reasoning_model(model: str) -> bool:
    """An OpenAI reasoning model (o1, o3, o4-mini, gpt-5...), by its id."""
    return REASONING_MODEL.search(model.strip().lower().rsplit("/", 1)[-1]) is not None


def estimated_prompt_tokens(body: dict[str, Any]) -> int:
    """What a request body's prompt comes to, by soda's estimate (characters / 4
    of the messages' text, the calls' arguments and the tools' schemas)."""
    chars = len(json.dumps(body.get("tools") or []))
    for message in body["messages"]:
        chars += len(message.get("content") or "")
        chars += sum(len(c["function"]["arguments"]) for c in message.get("tool_calls") or [])
    return chars // CHARS_PER_TOKEN


def undercounted(sent: int, counted: int) -> bool:
    """Whether a server counted far fewer prompt tokens than soda sent: under half
    its estimate, for a prompt long enough to tell (a tokenizer counts code at
    fewer characters a token than the estimate's four, never at twice as many)."""
    return sent >= UNDERCOUNT_FROM and 0 < counted * 2 < sent


def wire_tool(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.input_schema,
            "strict": True,
        },
    }


def wire_messages(messages: list[Message], json_mode: bool = False) -> list[dict[str, Any]]:
    """The conversation in chat-completions form. In JSON mode no tools are
    declared, so an earlier answer and the feedback on it travel as plain text."""
    if json_mode:
        return [_plain(message) for message in messages]
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "assistant":
            item: dict[str, Any] = {"role": "assistant", "content": message.text or None}
            if message.tool_calls:
                item["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": json.dumps(call.input)},
                    }
                    for call in message.tool_calls
                ]
            out.append(item)
            continue
        out.extend(
            {
                "role": "tool",
                "tool_call_id": result.call_id,
                "content": ("ERROR: " if result.is_error else "") + result.content,
            }
            for result in message.tool_results
        )
        if message.text:
            out.append({"role": "user", "content": message.text})
    return out


def _plain(message: Message) -> dict[str, Any]:
    """One turn as text only (JSON mode)."""
    parts = [result.content for result in message.tool_results]
    if message.text:
        parts.append(message.text)
    if message.role == "assistant" and not message.text:
        parts += [json.dumps(call.input) for call in message.tool_calls if not call.unreadable]
    return {"role": message.role, "content": "\n\n".join(parts) or "(an empty answer)"}


def to_response(
    data: Any, latency_ms: int, request: ModelRequest, json_mode: bool
) -> ModelResponse:
    """The answer in soda's terms; a body of the wrong shape, or with lone
    surrogates, is a RetryableError (the next attempt usually brings a whole one)."""
    try:
        choice = data["choices"][0]
        message = choice["message"]
        finish = str(choice.get("finish_reason") or "stop")
        text = message.get("content") or ""
        wire_calls = list(message.get("tool_calls") or [])
        usage = _usage(data.get("usage") or {})
        model = str(data.get("model") or request.model)
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        raise RetryableError(
            f"the model server's answer is not a chat completion: {str(data)[:200]!r}"
        ) from exc
    if has_lone_surrogates(data):
        raise RetryableError("the answer carries text with lone surrogates (invalid Unicode)")
    if message.get("refusal") or finish == "content_filter":
        raise ModelStopped(
            "refusal", f"the model refused: {message.get('refusal') or finish}", raw=data
        )
    truncated = finish == "length"
    if truncated:
        # Arguments are written as they go: the last call may be cut short.
        wire_calls = wire_calls[:-1]
    calls = [_tool_call(call) for call in wire_calls]
    if json_mode and not truncated:
        calls = [_read_call(ANSWER_CALL_ID, request.answer_tool, text)]
    if has_lone_surrogates([call.input for call in calls]):  # escaped inside the JSON
        raise RetryableError("the answer carries text with lone surrogates (invalid Unicode)")
    if json_mode:  # the text is the answer: kept only when it could not be read
        text = text if calls and calls[0].unreadable else ""
    return ModelResponse(
        text=text,
        tool_calls=calls,
        stop_reason=finish,
        usage=usage,
        model=model,
        raw=data,
        latency_ms=latency_ms,
        truncated=truncated,
    )


def _tool_call(call: dict[str, Any]) -> ToolCall:
    function = call.get("function") or {}
    arguments = function.get("arguments")
    if isinstance(arguments, dict):  # some servers send the object itself
        arguments = json.dumps(arguments)
    return _read_call(call.get("id") or "call", function.get("name") or "", arguments or "{}")


def _read_call(call_id: str, name: str, arguments: str) -> ToolCall:
    """A call from the arguments' text; text that is not a JSON object makes it
    `unreadable` (the runtime hands that back to the model)."""
    try:
        value = json.loads(arguments)
    except ValueError as exc:
        return ToolCall(call_id, name, {}, unreadable=f"not valid JSON ({exc})")
    if not isinstance(value, dict):
        return ToolCall(call_id, name, {}, unreadable="JSON, but not an object")
    return ToolCall(call_id, name, value)


def _usage(usage: dict[str, Any]) -> Usage:
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return Usage(
        input_tokens=max(0, (usage.get("prompt_tokens") or 0) - cached),
        output_tokens=usage.get("completion_tokens") or 0,
        cache_read_tokens=cached,
    )


def _error_message(response: httpx.Response) -> str:
    try:
        error = response.json().get("error")
    except ValueError:
        return response.text[:300]
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error or response.text[:300])
