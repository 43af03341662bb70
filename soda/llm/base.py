"""The model seam: one protocol every provider implements, and the plain data it speaks.

A provider turns a `ModelRequest` (system prompt, conversation, tools) into a
`ModelResponse` (text, tool calls, stop reason, usage). It owns the wire format,
retries of transient failures, and error classification; it knows nothing about
agents, contracts or the loop. Structured answers travel as a call to the
request's `answer_tool`, whatever mechanism the provider uses underneath.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from soda.config import Price
from soda.ports import Model as Model  # the port lives with the others

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
