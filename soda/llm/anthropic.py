"""The Anthropic provider: soda's `Model` protocol over the official SDK's Messages API.

It owns the wire format (requests with the stable prefix marked for prompt
caching, responses turned into `ModelResponse`), the choice between JSON-schema
structured output and a forced tool call for structured answers, and the
translation of SDK failures into soda's error tree at this one boundary. The
SDK's own retries are off; transient failures are retried by `soda.llm.retry`,
and a 200 that cannot be read as an answer (a body that is not JSON, not a
message, or text with lone surrogates) is one of them.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from typing import Any

import anthropic
from anthropic.types import Message as WireMessage

from soda.config import ModelConfig
from soda.errors import (
    CredentialsError,
    MaxTokensTooLarge,
    ModelStopped,
    PromptTooLong,
    SodaError,
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
    cacheable_breaks,
    fewest_breaks,
    has_lone_surrogates,
)
from soda.llm.ratelimits import anthropic_wait, retry_after
from soda.llm.retry import RetryableError, call_with_retries

DEFAULT_BASE_URL = "https://api.anthropic.com"
EPHEMERAL = {"type": "ephemeral"}
MAX_MARKERS = 4
"""Cache breakpoints the API takes in one request."""
ANSWER_CALL_ID = "answer"
"""Id of the ToolCall made from a JSON-schema structured answer."""
RETRYABLE_STATUS = frozenset({408, 409, 429})
"""Besides every 5xx (529 overloaded included): timeout, conflict, rate limit."""
CREDENTIAL_STATUS = frozenset({401, 403})
PROMPT_TOO_LONG = "prompt is too long"
"""How the API words a 400 for a conversation past the context window."""
NO_ROOM_TO_ANSWER = re.compile(
    r"input length and `?max_tokens`? exceed context limit: (\d+) \+ (\d+) > (\d+)"
)
"""How the API words a 400 for a prompt that fits the window, but not together
with max_tokens (input + max_tokens > window)."""
THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})


class AnthropicModel:
    """A Model answered by the Anthropic Messages API."""

    provider = "anthropic"

    def __init__(
        self,
        config: ModelConfig,
        emit: EventSink,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self.emit = emit
        self.sleep = sleep
        self.client = make_client(config)

    def complete(self, request: ModelRequest) -> ModelResponse:
        json_mode = answers_as_json(request)
        params = build_params(request, json_mode)
        # Reading the answer is part of the attempt: an unreadable 200 is retried.
        return call_with_retries(
            lambda: to_response(*self._send(params), request, json_mode),
            max_retries=self.config.max_retries,
            max_total_wait=self.config.max_retry_wait,
            emit=request.on_event or self.emit,
            describe=f"agent {request.agent} ({request.model})",
            sleep=self.sleep,
        )

    def _send(self, params: dict[str, Any]) -> tuple[WireMessage, int]:
        """One attempt; its latency excludes earlier failed attempts and waits."""
        started = time.monotonic()
        try:
            wire = self.client.messages.create(**params)
        except anthropic.APIError as exc:
            raise translate_error(exc, self.config) from exc
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            # The SDK hands a body that is not JSON (a cut connection, a proxy)
            # straight to json.loads; a second try usually gets a whole one.
            raise RetryableError(f"the response body was not valid JSON: {exc}") from exc
        if not isinstance(wire, WireMessage):
            raise RetryableError(f"the response was not a Messages API message: {wire!r:.200}")
        return wire, int((time.monotonic() - started) * 1000)


def make_client(config: ModelConfig) -> anthropic.Anthropic:
    """An SDK client with explicit timeouts and no retries of its own."""
    key = os.environ.get(config.api_key_env)
    if not key:
        raise CredentialsError(
            f"no Anthropic API key: set the environment variable {config.api_key_env} "
            "(or name another one in [model] api_key_env)"
        )
    base_url = config.base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
    # The SDK's default timeout is ten minutes and grows with max_tokens; soda's
    # read timeout is a choice a person made in soda.toml, so it is passed as is.
    # Writing the request and waiting for a pooled connection are as quick as
    # connecting, so they share its limit.
    timeout = anthropic.Timeout(
        connect=config.connect_timeout,
        read=config.read_timeout,
        write=config.connect_timeout,
        pool=config.connect_timeout,
    )
    return anthropic.Anthropic(api_key=key, base_url=base_url, max_retries=0, timeout=timeout)


def translate_error(exc: anthropic.APIError, config: ModelConfig) -> SodaError:
    """The soda error for an SDK failure: retryable, credentials, or structural."""
    if isinstance(exc, anthropic.APITimeoutError):
        return RetryableError(
            f"the request timed out (connect_timeout {config.connect_timeout:g}s, "
            f"read_timeout {config.read_timeout:g}s)"
        )
    if isinstance(exc, anthropic.APIConnectionError):
        return RetryableError(f"connection failed: {exc.__cause__ or exc}")
    if not isinstance(exc, anthropic.APIStatusError):
        return StructuralError(f"Anthropic API answered unexpectedly: {exc}")
    status = exc.status_code
    detail = f"HTTP {status} {exc.type or 'error'}: {exc.api_message or exc.message}"
    if status == 429:  # a rate limit: its reset may outlast the retry budget
        return RetryableError(detail, anthropic_wait(exc.response.headers), rate_limited=True)
    if status in RETRYABLE_STATUS or status >= 500:
        return RetryableError(detail, retry_after=retry_after(exc.response.headers))
    if status in CREDENTIAL_STATUS:
        return CredentialsError(
            f"the Anthropic API refused the key ({detail}); check the key in {config.api_key_env}"
        )
    said = str(exc.api_message or exc.message)
    if status == 400 and PROMPT_TOO_LONG in said.lower():
        return PromptTooLong(f"the Anthropic API refused a prompt too long ({detail})")
    no_room = NO_ROOM_TO_ANSWER.search(said) if status == 400 else None
    if no_room is not None:
        prompt, _, window = (int(n) for n in no_room.groups())
        return MaxTokensTooLarge(
            f"the Anthropic API found no room for max_tokens ({detail})", room=window - prompt
        )
    return StructuralError(f"the Anthropic API rejected the request ({detail})")


def answers_as_json(request: ModelRequest) -> bool:
    """How the structured answer travels, decided per call. With only the answer
    tool there is nothing to loop over, so the API's JSON-schema output returns
    the answer directly. With working tools too, the model answers by calling the
    answer tool, after what other calls it chooses."""
    names = {tool.name for tool in request.tools}
    if request.answer_tool not in names:
        raise StructuralError(
            f"agent {request.agent}: answer tool {request.answer_tool!r} is not among "
            f"its tools ({', '.join(sorted(names)) or 'none'})"
        )
    return names == {request.answer_tool}


def build_params(request: ModelRequest, json_mode: bool) -> dict[str, Any]:
    """Keyword arguments of `messages.create`. The API reads a prompt as tools,
    system, messages, and a cache hit needs the same prefix: the first message's
    parts (`Message.cache_breaks`) and the latest turn carry cache markers (see
    `wire_messages`), then the system prompt and the last tool while the API's
    limit of MAX_MARKERS allows."""
    tools = [] if json_mode else wire_tools(request.tools, marked=False)
    head = len(json.dumps([request.system, tools]))
    messages = wire_messages(request.messages, json_mode, (head, request.model))
    params: dict[str, Any] = {"model": request.model, "max_tokens": request.max_tokens}
    params["messages"] = messages
    spare = MAX_MARKERS - sum("cache_control" in b for m in messages for b in m["content"])
    if request.system:
        params["system"] = [{"type": "text", "text": request.system}]
        if spare > 0:
            params["system"][0]["cache_control"] = EPHEMERAL
            spare -= 1
    if json_mode:
        answer = next(tool for tool in request.tools if tool.name == request.answer_tool)
        params["output_config"] = {"format": {"type": "json_schema", "schema": answer.input_schema}}
    else:
        if tools and spare > 0:  # one breakpoint on the last tool caches them all
            tools[-1]["cache_control"] = EPHEMERAL
        params["tools"] = tools
        params["tool_choice"] = tool_choice(request)
        if request.thinking and not request.must_call:
            # Extended thinking rules out a forced tool call: auto turns only. Its
            # budget comes out of max_tokens, so the answer's own budget is added.
            params["thinking"] = {"type": "enabled", "budget_tokens": request.thinking}
            params["max_tokens"] = request.max_tokens + request.thinking
    return params


def tool_choice(request: ModelRequest) -> dict[str, Any]:
    """The model's choice (auto: it may write its reasoning before its calls), unless
    the turn must be a call: one named tool when the request names only one, else
    some tool. (The API cannot force a choice among several: the prompt says which.)"""
    if len(request.must_call) == 1:
        return {"type": "tool", "name": request.must_call[0]}
    if request.must_call:
        return {"type": "any"}
    return {"type": "auto"}


def wire_tools(tools: list[ToolSpec], marked: bool = True) -> list[dict[str, Any]]:
    wire: list[dict[str, Any]] = [
        {
            "name": tool.name,
            "description": tool.description,
            "input_schema": tool.input_schema,
            "strict": True,
        }
        for tool in tools
    ]
    # One breakpoint on the last tool caches every tool before it too.
    if wire and marked:
        wire[-1]["cache_control"] = EPHEMERAL
    return wire


def wire_messages(
    messages: list[Message], json_mode: bool, head: tuple[int, str] = (0, "")
) -> list[dict[str, Any]]:
    """The conversation with cache breakpoints at the end of the first user
    message's parts (`Message.cache_breaks`, MAX_MARKERS - 1 at most, see
    `fewest_breaks`: the spec, the repository map, then what lasts of the claims;
    the whole message when it names no parts), and on the latest turn's last
    block (a rolling marker: each turn of a tool loop reads everything before it
    from the cache, the previous turn wrote it). `build_params` gives the system
    prompt and the tools any marker left. `head`: the characters of tools and
    system prompt before the messages, and the model, whose shortest cacheable
    prefix drops the breaks before it (`cacheable_breaks`)."""
    wire: list[dict[str, Any]] = [
        {"role": m.role, "content": content_blocks(m, json_mode)} for m in messages
    ]
    first = next(
        (i for i, m in enumerate(messages) if m.role == "user" and wire[i]["content"]), None
    )
    if first is not None:
        message, blocks = messages[first], wire[first]["content"]
        breaks = [n for n in message.cache_breaks if 0 < n < len(message.text)]
        breaks = cacheable_breaks(breaks, message.text, *head) if first == 0 else breaks
        if breaks:
            _split_parts(blocks, message, fewest_breaks(breaks, MAX_MARKERS - 1))
        else:
            blocks[-1]["cache_control"] = EPHEMERAL
    last = next((w for w in reversed(wire) if w["content"]), None)
    if last is not None:
        last["content"][-1]["cache_control"] = EPHEMERAL
    return wire


def _split_parts(blocks: list[dict[str, Any]], message: Message, breaks: list[int]) -> None:
    """The message's text block as one block per part, each but the last marked."""
    index = next(
        i for i, b in enumerate(blocks) if b["type"] == "text" and b["text"] == message.text
    )
    text, ends = message.text, [*breaks, len(message.text)]
    parts: list[dict[str, Any]] = [
        {"type": "text", "text": text[start:end], "cache_control": EPHEMERAL}
        for start, end in zip([0, *breaks], ends, strict=True)
    ]
    del parts[-1]["cache_control"]
    blocks[index : index + 1] = parts


def content_blocks(message: Message, json_mode: bool) -> list[dict[str, Any]]:
    """Blocks of one turn. In JSON mode no tools are declared, and the API refuses
    tool_use blocks without tools, so earlier answers (and the feedback on them)
    travel as plain text."""
    # Thinking goes back first and unchanged (signatures are checked); JSON mode
    # never thinks.
    blocks: list[dict[str, Any]] = [] if json_mode else [dict(b) for b in message.thinking]
    for result in message.tool_results:  # the API wants results before any text
        if json_mode:
            blocks.append({"type": "text", "text": result.content})
        else:
            blocks.append(
                {
                    "type": "tool_result",
                    "tool_use_id": result.call_id,
                    "content": result.content,
                    "is_error": result.is_error,
                }
            )
    if message.text:
        blocks.append({"type": "text", "text": message.text})
    for call in message.tool_calls:
        if json_mode:
            if not message.text and call.unreadable is None:  # the text is the answer
                blocks.append({"type": "text", "text": json.dumps(call.input)})
        else:
            blocks.append(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": call.input}
            )
    if not blocks and message.role == "assistant":  # an empty answer, handed back
        blocks.append({"type": "text", "text": "(an empty answer)"})
    return blocks


def to_response(
    wire: WireMessage, latency_ms: int, request: ModelRequest, json_mode: bool
) -> ModelResponse:
    """The answer in soda's terms. A message this cannot read (fields missing or
    of the wrong type, lone surrogates) is a RetryableError, like a body that is
    not JSON at all: the next attempt usually brings a whole one."""
    try:
        blocks = list(wire.content)
        text = "\n".join(block.text for block in blocks if block.type == "text")
        calls = [
            ToolCall(id=block.id, name=block.name, input=dict(block.input))
            for block in blocks
            if block.type == "tool_use"
        ]
        thinking = [
            block.model_dump(mode="json") for block in blocks if block.type in THINKING_BLOCKS
        ]
        raw = wire.model_dump(mode="json")
        stop_reason = str(wire.stop_reason or "")
        usage = Usage(
            input_tokens=int(wire.usage.input_tokens),
            output_tokens=int(wire.usage.output_tokens),
            cache_creation_tokens=int(wire.usage.cache_creation_input_tokens or 0),
            cache_read_tokens=int(wire.usage.cache_read_input_tokens or 0),
        )
        model = str(wire.model)
    except (AttributeError, TypeError, ValueError) as exc:
        raise RetryableError(f"the response is not a readable Messages API message: {exc}") from exc
    if has_lone_surrogates([text, raw]):
        raise RetryableError("the response carries text with lone surrogates (invalid Unicode)")
    check_stop(request, stop_reason, text, raw)
    truncated = stop_reason == "max_tokens"
    if truncated and blocks and blocks[-1].type == "tool_use":
        # The API writes tool input as it goes: the last block may be cut short.
        calls = calls[:-1]
    if json_mode:
        calls = [] if truncated else [answer_call(request, text, raw)]
        if has_lone_surrogates(calls[0].input if calls else None):  # escaped inside the JSON
            raise RetryableError("the answer carries text with lone surrogates (invalid Unicode)")
    return ModelResponse(
        text=text,
        tool_calls=calls,
        stop_reason=stop_reason,
        usage=usage,
        model=model,
        raw=raw,
        latency_ms=latency_ms,
        truncated=truncated,
        thinking=thinking,
    )


def check_stop(request: ModelRequest, stop_reason: str, text: str, raw: Any) -> None:
    """Raise ModelStopped when the model refused to answer."""
    if stop_reason == "refusal":
        said = f": {text[:300]}" if text else ""
        raise ModelStopped("refusal", f"agent {request.agent}: the model refused{said}", raw)


def answer_call(request: ModelRequest, text: str, raw: Any) -> ToolCall:
    """The JSON-schema answer as a call to the answer tool, as tool mode delivers it;
    an answer that is not a JSON object comes back `unreadable` (the runtime hands
    it back to the model once)."""
    try:
        answer = json.loads(text)
    except json.JSONDecodeError as exc:
        return ToolCall(
            ANSWER_CALL_ID, request.answer_tool, {}, unreadable=f"not valid JSON ({exc})"
        )
    if not isinstance(answer, dict):
        return ToolCall(
            ANSWER_CALL_ID, request.answer_tool, {}, unreadable="JSON, but not an object"
        )
    return ToolCall(id=ANSWER_CALL_ID, name=request.answer_tool, input=answer)
