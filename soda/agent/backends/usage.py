"""What one model call through the egress proxy cost: tokens (cache reads and
writes included), the model and how it stopped, read from the response as it
streams by, for the Messages API (Claude Code) and the Responses API (Codex).

The proxy feeds every chunk of the response body to a `Meter`; the meter reads
the server-sent events (or, for a plain JSON answer, the whole body) and keeps
only what `agent_calls` needs. Text deltas, the bulk of a stream, are skipped
without being parsed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from soda.llm.base import Usage

Api = Literal["messages", "responses"]
_SKIPPED = (b"content_block_delta", b".delta", b"ping")
"""Events that carry no usage: left unparsed."""
MAX_BUFFER = 4 << 20
"""A plain JSON body past this size is not read for usage (a stream never is whole)."""


@dataclass
class Meter:
    """Usage read from one response body, chunk by chunk."""

    api: Api
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    stop_reason: str = ""
    error: str = ""
    """The error a 200 stream ended with (`error` / `response.failed` event)."""
    _pending: bytes = b""
    _whole: list[bytes] = field(default_factory=list)
    _size: int = 0
    _stream: bool | None = None

    def feed(self, chunk: bytes) -> None:
        if self._stream is None:
            self._stream = not chunk.lstrip().startswith(b"{")
        if not self._stream:
            self._size += len(chunk)
            if self._size <= MAX_BUFFER:
                self._whole.append(chunk)
            return
        lines = (self._pending + chunk).split(b"\n")
        self._pending = lines.pop()
        for line in lines:
            self._line(line)

    def finish(self) -> None:
        if self._stream:
            self._line(self._pending)
        elif self._whole and self._size <= MAX_BUFFER:
            try:
                body = json.loads(b"".join(self._whole))
            except ValueError:
                return
            if isinstance(body, dict):
                self._read(body if self.api == "messages" else {"response": body}, whole=True)

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:") or any(skip in line[:80] for skip in _SKIPPED):
            return
        try:
            event = json.loads(line[5:])
        except ValueError:
            return
        if isinstance(event, dict):
            self._read(event)

    def _read(self, event: dict[str, Any], whole: bool = False) -> None:
        if self.api == "messages":
            self._messages(event, whole)
        else:
            self._responses(event, whole)

    def _messages(self, event: dict[str, Any], whole: bool) -> None:
        kind = event.get("type")
        if kind == "message_start" or whole:
            message = event.get("message", event) if not whole else event
            if isinstance(message, dict):
                self.model = str(message.get("model") or self.model)
                self.stop_reason = str(message.get("stop_reason") or self.stop_reason)
                self._anthropic_usage(message.get("usage"))
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            self.stop_reason = str(delta.get("stop_reason") or self.stop_reason)
            self._anthropic_usage(event.get("usage"))
        elif kind == "error":
            self.error = json.dumps(event.get("error"))[:300]

    def _anthropic_usage(self, usage: Any) -> None:
        """Later events repeat or raise the counts: the largest seen wins."""
        if not isinstance(usage, dict):
            return
        u = self.usage
        u.input_tokens = max(u.input_tokens, _int(usage.get("input_tokens")))
        u.output_tokens = max(u.output_tokens, _int(usage.get("output_tokens")))
        created = _int(usage.get("cache_creation_input_tokens"))
        u.cache_creation_tokens = max(u.cache_creation_tokens, created)
        read = _int(usage.get("cache_read_input_tokens"))
        u.cache_read_tokens = max(u.cache_read_tokens, read)

    def _responses(self, event: dict[str, Any], whole: bool) -> None:
        kind = event.get("type")
        response = event.get("response")
        if not isinstance(response, dict):
            if kind == "error":
                self.error = str(event.get("message") or event)[:300]
            return
        self.model = str(response.get("model") or self.model)
        if kind in ("response.completed", "response.incomplete", "response.failed") or whole:
            self.stop_reason = str(response.get("status") or kind)
            usage = response.get("usage")
            if isinstance(usage, dict):
                cached = _int((usage.get("input_tokens_details") or {}).get("cached_tokens"))
                self.usage = Usage(
                    input_tokens=max(_int(usage.get("input_tokens")) - cached, 0),
                    output_tokens=_int(usage.get("output_tokens")),
                    cache_read_tokens=cached,
                )
        if kind == "response.failed":
            self.error = json.dumps(response.get("error"))[:300]


def _int(value: Any) -> int:
    return value if isinstance(value, int) and value >= 0 else 0
