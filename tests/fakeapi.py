"""A local Messages API server for tests: scripted answers and faults on demand.

The real anthropic SDK is pointed at it through `base_url`, so the whole HTTP
path (request building, status handling, parsing, timeouts) runs for real; only
the far end is fake. It serves `POST /v1/messages` from a queue of `Reply`
items, built with the helpers below, and records every request.

    pytest_plugins = ("tests.fakeapi",)     # in a test module: makes `fake_api` available

    def test_something(fake_api):
        fake_api.enqueue(overloaded(), tool_use_response("submit", {"ok": True}))
        ...  # ModelConfig(base_url=fake_api.url) and a key in ANTHROPIC_API_KEY
        assert fake_api.requests[-1].body["tool_choice"] == {"type": "any"}

Faults: `rate_limited(retry_after)` (429), `limit_window(seconds)` (the rate limit
is spent for `seconds`: that request and every one until then get a 429 with
Anthropic's `anthropic-ratelimit-*` headers saying when it resets, the queue
untouched; requests are stamped with `clock`, a function the test may share
with soda's Clock, which also dates the answers), `server_error()` (500), `overloaded()`
(529), `unauthorized()` (401), `bad_request(message)` (400), `prompt_too_long()`
(the API's 400 for a conversation past the context window), `stall(seconds)` (no
answer until the client gives up; bounded), `drop()` (socket closed without a
response), `truncated()` (valid headers, body cut in half), `garbage(payload)` (a
200 whose body is not JSON, or not a message). Answers: `text_response`,
`json_response`, `tool_use_response`, `message_response`, `refusal_response`,
`max_tokens_response`, `surrogate_response` (valid JSON spelling a lone surrogate
as `\\ud83d`). A request that finds the queue empty gets a 500 "fake API script
exhausted" and fails the test at teardown, so a short script can never pass quietly,
unless a `respond(body) -> Reply` function is set: then it answers what the queue
does not (a behavioural fake, for runs whose calls are not known in advance).

Prompt caching: with `simulate_cache = True` every answer's usage is computed
from the request as the API would count it (tests/fakecache.py).

PYTEST_DONT_REWRITE: test modules import the builders before pytest loads this
module as a plugin, so pytest could not rewrite it anyway; the marker keeps it
from warning about that (there are no asserts here to rewrite).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import pytest

from tests.fakecache import cache_usage

Fault = Literal["stall", "drop", "truncate"]
DEFAULT_MODEL = "claude-sonnet-4-6"
_ids = itertools.count(1)


@dataclass(frozen=True)
class Reply:
    """One scripted answer: a status, a JSON body and headers, or a fault."""

    status: int = 200
    body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    fault: Fault | None = None
    stall_seconds: float = 0.0
    payload: bytes | None = None
    """Sent verbatim instead of the JSON of `body` (for bodies that are not JSON)."""
    content_type: str = "application/json"
    limit_seconds: float = 0.0
    """Above 0: the rate limit is spent from now for this long (see `limit_window`)."""


@dataclass(frozen=True)
class RecordedRequest:
    """What the client sent: header names are lower-cased, the body parsed from JSON."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    at: float = 0.0
    """When it came, by the server's `clock` (seconds since the epoch)."""


class FakeAPI:
    """The server: a queue of replies in, a list of recorded requests out."""

    def __init__(self, path: str = "/v1/messages", require_key: bool = True) -> None:
        self.path = path
        """The one endpoint served (the OpenAI-compatible fake reuses this server)."""
        self.require_key = require_key
        self.requests: list[RecordedRequest] = []
        self.exhausted = 0
        self.respond: Callable[[Any], Reply] | None = None
        """Answers a request the queue has no reply for (see the module docstring)."""
        self.simulate_cache = False
        self.clock: Callable[[], float] = time.time
        """The server's time (seconds since the epoch): stamps requests, dates
        answers and times rate-limit windows; a test may share its fake clock."""
        self.limited_until: float | None = None
        """While the clock is before it, every request gets a spent rate limit."""
        self._cached: set[str] = set()
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def pending(self) -> int:
        """Replies not yet served."""
        with self._lock:
            return len(self._queue)

    def enqueue(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        # Wakes stalled handlers so teardown does not wait out their sleep.
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _limited(self, now: float) -> Reply | None:
        """The 429 of a spent rate limit, while one is spent (or a `limit_window`
        reply at the head of the queue spends it now)."""
        with self._lock:
            if self._queue and self._queue[0].limit_seconds > 0:
                self.limited_until = now + self._queue.popleft().limit_seconds
            if self.limited_until is not None and now < self.limited_until:
                return spent_limit(self.limited_until)
        return None

    def _next_reply(self, body: Any = None) -> Reply:
        with self._lock:
            if self._queue:
                return self._with_cache(self._queue.popleft(), body)
            if self.respond is None:
                self.exhausted += 1
            number = len(self.requests)
        if self.respond is not None:
            reply = self.respond(body)
            with self._lock:
                return self._with_cache(reply, body)
        return error_response(
            500, "api_error", f"fake API script exhausted: request {number} found no reply"
        )

    def _with_cache(self, reply: Reply, body: Any) -> Reply:
        """`reply` with the usage the simulated prompt cache gives `body`."""
        if not self.simulate_cache or reply.status != 200 or "usage" not in reply.body:
            return reply
        counted = cache_usage(body, self._cached)
        tokens = {**reply.body["usage"], **counted}
        return Reply(
            status=reply.status,
            body={**reply.body, "usage": tokens},
            headers=reply.headers,
            fault=reply.fault,
            stall_seconds=reply.stall_seconds,
            payload=reply.payload,
            content_type=reply.content_type,
        )


class _Server(ThreadingHTTPServer):
    # Handler threads may be parked on a kept-alive connection or a stall;
    # they must never keep the test process alive.
    daemon_threads = True
    fake: FakeAPI


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like the real API
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request log lines; tests assert on `requests` instead."""

    def date_time_string(self, timestamp: float | None = None) -> str:
        """The `date` header, by the fake's clock."""
        return formatdate(self.server.fake.clock() if timestamp is None else timestamp, usegmt=True)

    def do_POST(self) -> None:
        fake = self.server.fake
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        headers = {name.lower(): value for name, value in self.headers.items()}
        now = fake.clock()
        fake._record(RecordedRequest("POST", self.path, headers, _parse(raw), now))
        limited = fake._limited(now) if self.path.split("?")[0] == fake.path else None
        if limited is not None:
            reply = limited
        elif self.path.split("?")[0] != fake.path:
            reply = error_response(404, "not_found_error", f"fake API has no {self.path}")
        elif fake.require_key and not api_key_of(headers):
            reply = error_response(401, "authentication_error", "x-api-key header is required")
        else:
            reply = fake._next_reply(_parse(raw))
        self._serve(reply)

    def _serve(self, reply: Reply) -> None:
        if reply.fault == "drop":
            self.close_connection = True
            return
        if reply.fault == "stall":
            self.server.fake._closing.wait(reply.stall_seconds)
            self.close_connection = True
            return
        payload = json.dumps(reply.body).encode() if reply.payload is None else reply.payload
        if reply.fault == "truncate":
            payload = payload[: len(payload) // 2]
        self.send_response(reply.status)
        self.send_header("content-type", reply.content_type)
        self.send_header("content-length", str(len(payload)))
        self.send_header("request-id", f"req_fake_{next(_ids)}")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)


def api_key_of(headers: dict[str, str]) -> str | None:
    """The key a request carried: the SDK sends it as `x-api-key` or, in newer
    versions, as `authorization: Bearer <key>`; the API accepts both."""
    if "x-api-key" in headers:
        return headers["x-api-key"]
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return token if scheme.lower() == "bearer" and token else None


def _parse(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


def serve(fake: FakeAPI) -> Iterator[FakeAPI]:
    """Run `fake` for one test; fail the test if its script ran out."""
    fake.start()
    try:
        yield fake
    finally:
        fake.close()
    if fake.exhausted:
        pytest.fail(f"fake API script exhausted: {fake.exhausted} request(s) found the queue empty")


@pytest.fixture
def fake_api() -> Iterator[FakeAPI]:
    """A running fake Messages API."""
    yield from serve(FakeAPI())


# Builders: real wire-format bodies, so the SDK parses them as it would the API's.


def usage(
    input_tokens: int = 100,
    output_tokens: int = 20,
    cache_creation_input_tokens: int = 0,
    cache_read_input_tokens: int = 0,
) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": cache_creation_input_tokens,
        "cache_read_input_tokens": cache_read_input_tokens,
    }


def message_response(
    content: list[dict[str, Any]],
    *,
    stop_reason: str = "end_turn",
    model: str = DEFAULT_MODEL,
    tokens: dict[str, Any] | None = None,
) -> Reply:
    """A 200 carrying a Messages API `message` with the given content blocks."""
    return Reply(
        body={
            "id": f"msg_fake_{next(_ids)}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": tokens or usage(),
        }
    )


def text_response(text: str, **kwargs: Any) -> Reply:
    return message_response([{"type": "text", "text": text}], **kwargs)


def json_response(answer: Any, **kwargs: Any) -> Reply:
    """A structured-output answer: the JSON text of `answer` in one text block."""
    return text_response(json.dumps(answer), **kwargs)


def tool_use_response(
    name: str, input: dict[str, Any], *, id: str | None = None, text: str = "", **kwargs: Any
) -> Reply:
    """The model calls one tool (after optional prose), stop_reason tool_use."""
    block = {
        "type": "tool_use",
        "id": id or f"toolu_fake_{next(_ids)}",
        "name": name,
        "input": input,
    }
    content = ([{"type": "text", "text": text}] if text else []) + [block]
    kwargs.setdefault("stop_reason", "tool_use")
    return message_response(content, **kwargs)


def refusal_response(text: str = "I can't help with that.", **kwargs: Any) -> Reply:
    return text_response(text, stop_reason="refusal", **kwargs)


def surrogate_response(text: str = "half an emoji: \ud83d", **kwargs: Any) -> Reply:
    """A text answer holding a lone surrogate. json.dumps escapes it (`\\ud83d`), so
    the body is valid JSON whose string no UTF-8 encoder can carry."""
    return text_response(text, **kwargs)


def max_tokens_response(text: str = '{"summary": "cut off mid', **kwargs: Any) -> Reply:
    return text_response(text, stop_reason="max_tokens", **kwargs)


def error_response(
    status: int, error_type: str, message: str, headers: dict[str, str] | None = None
) -> Reply:
    """An error in the API's shape: {"type": "error", "error": {"type", "message"}}."""
    body = {"type": "error", "error": {"type": error_type, "message": message}}
    return Reply(status=status, body=body, headers=headers or {})


def rate_limited(retry_after: float = 1) -> Reply:
    return error_response(
        429,
        "rate_limit_error",
        "Number of requests has exceeded your rate limit",
        {"retry-after": f"{retry_after:g}"},
    )


def limit_window(seconds: float) -> Reply:
    """The rate limit is spent for `seconds` from the request that meets this reply:
    it and every request until then get `spent_limit`, the queue untouched."""
    return Reply(limit_seconds=seconds)


def spent_limit(reset: float, retry_after: float | None = None) -> Reply:
    """A 429 as the API sends it when the request limit is spent until `reset`
    (seconds since the epoch): the spent limit's `-remaining` is 0, the token
    limit, not spent, resets sooner."""
    headers = {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": _rfc3339(reset),
        "anthropic-ratelimit-tokens-limit": "80000",
        "anthropic-ratelimit-tokens-remaining": "79000",
        "anthropic-ratelimit-tokens-reset": _rfc3339(reset - 30),
    }
    if retry_after is not None:
        headers["retry-after"] = f"{retry_after:g}"
    return error_response(
        429, "rate_limit_error", "Number of request tokens has exceeded your rate limit", headers
    )


def _rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def server_error() -> Reply:
    return error_response(500, "api_error", "Internal server error")


def overloaded() -> Reply:
    return error_response(529, "overloaded_error", "Overloaded")


def unauthorized() -> Reply:
    return error_response(401, "authentication_error", "invalid x-api-key")


def bad_request(message: str = "messages: field required") -> Reply:
    return error_response(400, "invalid_request_error", message)


def prompt_too_long(tokens: int = 215_000) -> Reply:
    """The API's refusal of a conversation past the context window."""
    return bad_request(f"prompt is too long: {tokens} tokens > 200000 maximum")


def garbage(
    payload: bytes | dict[str, Any] = b"<html>502 Bad Gateway</html>",
    content_type: str = "application/json",
) -> Reply:
    """A 200 that is not a message: bytes sent as they are (not JSON, or not even
    UTF-8), or a JSON object of the wrong shape."""
    if isinstance(payload, dict):
        return Reply(body=payload, content_type=content_type)
    return Reply(payload=payload, content_type=content_type)


def stall(seconds: float = 2.0) -> Reply:
    """Say nothing for `seconds` (longer than the client's read timeout), then hang up."""
    return Reply(fault="stall", stall_seconds=seconds)


def drop() -> Reply:
    """Read the request, then close the socket without a response."""
    return Reply(fault="drop")


def truncated(reply: Reply | None = None) -> Reply:
    """`reply` (a text answer by default) with its JSON body cut in half; the
    content-length header matches the cut body, so only the JSON is broken."""
    base = reply or text_response("this answer is cut off")
    return Reply(status=base.status, body=base.body, headers=base.headers, fault="truncate")
