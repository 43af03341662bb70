"""A local streaming model API for the coding CLIs: Messages API (Claude Code) and
Responses API (Codex), both as server-sent events, answering from a script.

The CLIs are real programs at their pinned versions; only the far end is fake.
A test gives the server a behavioural function, `respond(request) -> Step`, that
looks at what was asked (the last tool result, the tools offered) and says what
the model does next: `say(text)` (a final answer), `call(tool, input)` (a tool
call), or a fault: `status(529)` (an error answer), `stall_after_start()` (the
stream opens and then says nothing, until the client gives up or the server
closes). Every request is recorded with its headers, so a test can assert what
reached the model (never the real key, always soda's).

    server = StreamAPI(respond); server.start(); ...; server.close()

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_ids = itertools.count(1)
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}
"""The API's error type for a status, as the CLIs read it (they retry some)."""


@dataclass(frozen=True)
class Step:
    """What the model does on one request."""

    text: str = ""
    tool: str | None = None
    input: dict[str, Any] = field(default_factory=dict)
    status: int = 200
    stall: bool = False
    input_tokens: int = 1200
    output_tokens: int = 60
    cache_read: int = 300
    cache_write: int = 100
    headers: dict[str, str] = field(default_factory=dict)
    """Sent with an error answer (e.g. a 429's rate-limit headers)."""


def say(text: str) -> Step:
    return Step(text=text)


def call(tool: str, input: dict[str, Any], text: str = "") -> Step:
    return Step(text=text, tool=tool, input=input)


def status(code: int, headers: dict[str, str] | None = None) -> Step:
    return Step(status=code, headers=headers or {})


def stall_after_start() -> Step:
    return Step(stall=True)


@dataclass(frozen=True)
class Seen:
    """One request as the server saw it."""

    path: str
    headers: dict[str, str]
    body: Any


class StreamAPI:
    """The server: `respond` decides each answer; `requests` records each request."""

    def __init__(self, respond: Callable[[Seen], Step]) -> None:
        self.respond = respond
        self.requests: list[Seen] = []
        self.closing = threading.Event()
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.api = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> StreamAPI:
        self._thread.start()
        return self

    def close(self) -> None:
        self.closing.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def model_requests(self) -> list[Seen]:
        with self._lock:
            return [r for r in self.requests if r.path.startswith(("/v1/messages", "/v1/resp"))]

    def _seen(self, seen: Seen) -> None:
        with self._lock:
            self.requests.append(seen)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    api: StreamAPI


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests assert on `requests`."""

    def do_GET(self) -> None:
        self._answer_json(404, {"type": "error", "error": {"type": "not_found_error"}})

    def do_HEAD(self) -> None:
        self._answer_json(200, {})

    def do_POST(self) -> None:
        api = self.server.api
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        headers = {k.lower(): v for k, v in self.headers.items()}
        seen = Seen(self.path, headers, body)
        api._seen(seen)
        path = self.path.split("?")[0]
        if path == "/v1/messages/count_tokens":
            self._answer_json(200, {"input_tokens": 1000})
            return
        if path not in ("/v1/messages", "/v1/responses"):
            self._answer_json(404, {"type": "error", "error": {"type": "not_found_error"}})
            return
        step = api.respond(seen)
        if step.status != 200:
            kind = ERROR_TYPES.get(step.status, "api_error")
            error = {"type": kind, "message": f"stand-in {kind}"}
            self._answer_json(step.status, {"type": "error", "error": error}, step.headers)
            return
        events = _messages(step, body) if path == "/v1/messages" else _responses(step, body)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        for number, (name, data) in enumerate(events):
            if step.stall and number == 1:
                api.closing.wait(60)  # bounded: the server's close ends it
                return
            chunk = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
            try:
                self.wfile.write(chunk)
                self.wfile.flush()
            except OSError:
                return

    def _answer_json(
        self, code: int, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        payload = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)


def _messages(step: Step, body: Any) -> list[tuple[str, dict[str, Any]]]:
    """A Messages API stream: message_start, the content blocks, message_delta, stop."""
    model = body.get("model", "claude-sonnet-4-6") if isinstance(body, dict) else "claude"
    usage = {
        "input_tokens": step.input_tokens,
        "output_tokens": 1,
        "cache_creation_input_tokens": step.cache_write,
        "cache_read_input_tokens": step.cache_read,
    }
    message = {
        "id": f"msg_stream_{next(_ids)}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": message})
    ]
    index = 0
    if step.text:
        events += [
            ("content_block_start", {"type": "content_block_start", "index": index,
                                     "content_block": {"type": "text", "text": ""}}),
            ("content_block_delta", {"type": "content_block_delta", "index": index,
                                     "delta": {"type": "text_delta", "text": step.text}}),
            ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]  # fmt: skip
        index += 1
    if step.tool:
        block = {"type": "tool_use", "id": f"toolu_{next(_ids)}", "name": step.tool, "input": {}}
        events += [
            ("content_block_start", {"type": "content_block_start", "index": index,
                                     "content_block": block}),
            ("content_block_delta", {"type": "content_block_delta", "index": index,
                                     "delta": {"type": "input_json_delta",
                                               "partial_json": json.dumps(step.input)}}),
            ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]  # fmt: skip
    stop = "tool_use" if step.tool else "end_turn"
    events += [
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": stop, "stop_sequence": None},
                           "usage": {"output_tokens": step.output_tokens}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip
    return events


def _responses(step: Step, body: Any) -> list[tuple[str, dict[str, Any]]]:
    """A Responses API stream: created, the output items, completed (with usage)."""
    model = body.get("model", "gpt-5-codex") if isinstance(body, dict) else "gpt-5-codex"
    rid = f"resp_{next(_ids)}"
    base = {"id": rid, "object": "response", "model": model, "status": "in_progress"}
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"type": "response.created", "response": {**base, "output": []}})
    ]
    output: list[dict[str, Any]] = []
    if step.text:
        item = {
            "type": "message",
            "id": f"msg_{next(_ids)}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": step.text, "annotations": []}],
        }
        output.append(item)
    if step.tool:
        item = {
            "type": "function_call",
            "id": f"fc_{next(_ids)}",
            "call_id": f"call_{next(_ids)}",
            "name": step.tool,
            "arguments": json.dumps(step.input),
            "status": "completed",
        }
        output.append(item)
    for number, item in enumerate(output):
        events.append(
            ("response.output_item.done",
             {"type": "response.output_item.done", "output_index": number, "item": item})
        )  # fmt: skip
    usage = {
        "input_tokens": step.input_tokens + step.cache_read,
        "input_tokens_details": {"cached_tokens": step.cache_read},
        "output_tokens": step.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": step.input_tokens + step.cache_read + step.output_tokens,
    }
    done = {**base, "status": "completed", "output": output, "usage": usage}
    events.append(("response.completed", {"type": "response.completed", "response": done}))
    return events
