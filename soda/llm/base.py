"""The model seam: one protocol every provider implements, and the plain data it speaks.

A provider turns a `ModelRequest` (system prompt, conversation, tools) into a
`ModelResponse` (text, tool calls, stop reason, usage). It owns the wire format,
retries of transient failures, and error classification; it knows nothing about
agents, contracts or the loop. Structured answers travel as a call to the
request's `answer_tool`, whatever mechanism the provider uses underneath.

A response cut off at `max_tokens` comes back `truncated`, without the tool call
that was being written when the limit struck; a conversation longer than the
model's context raises `PromptTooLong`, and a prompt that fits but leaves no room
for `max_tokens` raises `MaxTokensTooLarge`; tool arguments that are not JSON come
back as a call marked `unreadable`; a 200 whose body is not a readable answer
(not JSON, the wrong shape, text with lone surrogates) is a transient failure.
What to do about a truncated answer, a long prompt or a slip is the runtime's call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from soda.config import Price

EventSink = Callable[[str, dict[str, Any]], None]
"""Receives (kind, data) for provider-level events such as retries."""


def ignore_event(kind: str, data: dict[str, Any]) -> None:
    """An EventSink that drops everything."""


@dataclass(frozen=True)
class ToolSpec:
    """A tool offered to the model: name, description and JSON Schema of its input."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    input: dict[str, Any]
    unreadable: str | None = None
    """Why the arguments the model wrote could not be read as a JSON object (then
    `input` is empty). A provider reports it here rather than stopping: the
    runtime hands the problem back to the model once, like any other slip."""


@dataclass(frozen=True)
class ToolResult:
    call_id: str
    content: str
    is_error: bool = False


@dataclass
class Message:
    """One conversation turn. Assistant turns carry text and tool calls; user turns
    carry text or the results of the previous turn's tool calls."""

    role: str
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_results: list[ToolResult] = field(default_factory=list)
    cache_breaks: tuple[int, ...] = ()
    """Where parts of `text` that change less often than what follows them end,
    ascending: the spec and standing context (the same in every iteration), the
    repository map (for the agents that plan), then what lasts of the claims
    (learnings, standing tasks). A provider with prompt caching sends each part as
    a block of its own, marked for the cache (with more parts than it has
    markers, the shortest share the next one's); others send `text` whole."""
    thinking: list[dict[str, Any]] = field(default_factory=list)
    """An assistant turn's extended-thinking blocks, exactly as the provider gave
    them (signatures included): the API wants them back, unchanged, with the
    turn's tool calls. Opaque to everyone but the provider that made them."""


MIN_CACHEABLE_TOKENS: tuple[tuple[str, int], ...] = (
    ("claude-haiku-4-5", 4096),
    ("claude-opus-4-5", 4096),
    ("claude-opus-4-6", 4096),
    ("claude-opus-4-7", 4096),
    ("claude-3-5-haiku", 2048),
    ("claude-3-haiku", 2048),
    ("claude-", 1024),
)
"""The shortest prompt prefix a model's cache keeps, in tokens, by model-id
prefix (first match wins), as Anthropic documents them. Unknown models: 0."""
PREFIX_CHARS_PER_TOKEN = 4
"""Characters per token when a prefix's length is estimated before sending."""


def min_cacheable(model: str) -> int:
    """The model's shortest cacheable prefix in tokens (0 when soda does not know it)."""
    return next((n for prefix, n in MIN_CACHEABLE_TOKENS if model.startswith(prefix)), 0)


def cacheable_breaks(breaks: list[int], text: str, head_chars: int, model: str) -> list[int]:
    """The `breaks` of a first message's `text` whose prefix reaches the model's
    shortest cacheable prefix: `head_chars` (the JSON of the tools and system
    prompt sent before it), then the text up to the break as JSON, estimated at
    PREFIX_CHARS_PER_TOKEN. A marker on a shorter prefix caches nothing: it is
    left for a later part (on Claude Haiku 4.5, 4,096 tokens, a short spec and
    the rules after it may reach that only together)."""
    floor = min_cacheable(model) * PREFIX_CHARS_PER_TOKEN - head_chars
    return [n for n in breaks if floor <= 0 or len(json.dumps(text[:n])) >= floor]


def fewest_breaks(breaks: list[int], limit: int) -> list[int]:
    """`Message.cache_breaks` cut to a provider's `limit` of cache markers. While
    there are too many, the shortest part gives up its break and shares the marker
    of the part after it: it is sent again whenever that next part changes, and it
    is the cheapest to send again. The last break, where what lasts ends, stays."""
    kept = list(breaks)
    while len(kept) > max(limit, 1):
        sizes = [end - start for start, end in zip([0, *kept[:-2]], kept[:-1], strict=True)]
        kept.pop(sizes.index(min(sizes)))
    return kept


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_tokens: int = 0
    cache_read_tokens: int = 0

    @property
    def total(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_creation_tokens
            + self.cache_read_tokens
        )

    def cost(self, price: Price | None) -> float:
        """USD for this usage at `price` (per million tokens); 0 when unpriced."""
        if price is None:
            return 0.0
        return (
            self.input_tokens * price.input
            + self.output_tokens * price.output
            + self.cache_creation_tokens * price.cache_write
            + self.cache_read_tokens * price.cache_read
        ) / 1_000_000


@dataclass
class ModelRequest:
    agent: str
    model: str
    system: str
    messages: list[Message]
    tools: list[ToolSpec]
    answer_tool: str
    """Name of the tool in `tools` whose input is the agent's structured answer."""
    max_tokens: int = 8192
    must_call: tuple[str, ...] = ()
    """When set, this turn must be a call to one of these tools. Every tool stays
    declared (so the prompt cache holds); providers force a single name through
    their tool choice, and several names as "some tool". When empty the model
    chooses (tool choice auto): it may think aloud before its calls, or end its
    turn without one (the runtime reminds it)."""
    thinking: int = 0
    """Tokens of extended thinking to allow on top of `max_tokens` (0: none). Only
    providers that have it send it (Anthropic), and only on a turn whose tool
    choice is the model's (`must_call` empty)."""
    iteration: int | None = None
    """The iteration that asks (None outside one). Providers send nothing of it;
    a scripted model that starts mid-run finds its place in its script by it."""
    on_event: EventSink | None = field(default=None, compare=False, repr=False)
    """Where the provider's events about this request go (`provider.retry`): the
    asking agent's iteration. None: the sink the provider was built with."""


@dataclass
class ModelResponse:
    text: str
    tool_calls: list[ToolCall]
    stop_reason: str
    usage: Usage
    model: str
    raw: Any = None
    """The provider's response as JSON-able data, stored verbatim in agent_calls."""
    latency_ms: int = 0
    truncated: bool = False
    """Cut off at max_tokens: `tool_calls` holds only the calls that arrived whole."""
    thinking: list[dict[str, Any]] = field(default_factory=list)
    """Extended-thinking blocks, kept for the conversation (see `Message.thinking`)."""


OUTPUT_TOKEN_LIMITS: tuple[tuple[str, int], ...] = (
    ("claude-3-haiku", 4096),
    ("claude-3-5-", 8192),
    ("claude-opus-4-0", 32000),
    ("claude-opus-4-1", 32000),
    ("claude-opus-4-2025", 32000),
    ("claude-", 64000),
)
"""The most output tokens a model may be asked for, by model-id prefix (first
match wins). Unknown models (local servers) have no entry."""


def output_token_limit(model: str) -> int | None:
    """The model's output-token maximum, or None when soda does not know it."""
    return next((limit for prefix, limit in OUTPUT_TOKEN_LIMITS if model.startswith(prefix)), None)


def raised_limit(model: str, current: int) -> int | None:
    """`current` doubled, capped at the model's maximum (unknown models: just
    doubled); None when there is no room to raise it."""
    cap = output_token_limit(model) or current * 2
    raised = min(current * 2, cap)
    return raised if raised > current else None


_SURROGATE = re.compile("[\ud800-\udfff]")
"""In a Python str every surrogate is a lone one: JSON's escaped pairs decode to
one code point, so anything left in this range can never be encoded as UTF-8."""


def has_lone_surrogates(value: Any) -> bool:
    """Whether any string in `value` (nested lists and dicts, keys included) holds
    a lone surrogate, which UTF-8, SQLite and the next request cannot carry."""
    if isinstance(value, str):
        return _SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(has_lone_surrogates(k) or has_lone_surrogates(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(has_lone_surrogates(item) for item in value)
    return False


def without_surrogates(value: Any) -> Any:
    """`value` with every lone surrogate replaced by U+FFFD, safe to store or send."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {without_surrogates(k): without_surrogates(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [without_surrogates(item) for item in value]
    return value


def safe_response(response: ModelResponse) -> ModelResponse:
    """`response` with lone surrogates replaced in its text, tool calls and raw data
    (the same object when it has none)."""
    calls = [(call.id, call.name, call.input, call.unreadable) for call in response.tool_calls]
    fields = [response.text, response.stop_reason, response.model, calls, response.raw]
    if not has_lone_surrogates(fields):
        return response
    return replace(
        response,
        text=without_surrogates(response.text),
        tool_calls=[
            ToolCall(
                id=without_surrogates(call.id),
                name=without_surrogates(call.name),
                input=without_surrogates(call.input),
                unreadable=without_surrogates(call.unreadable),
            )
            for call in response.tool_calls
        ],
        stop_reason=without_surrogates(response.stop_reason),
        model=without_surrogates(response.model),
        raw=without_surrogates(response.raw),
    )


class Model(Protocol):
    """A model provider: the one seam soda fakes in tests (`soda.llm.function`,
    `soda.llm.scripted`, or a local server speaking the provider's HTTP API)."""

    provider: str

    def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer one request. Raises TransientError once retries are spent,
        CredentialsError on a refused key, StructuralError on anything else."""
        ...
