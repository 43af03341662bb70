"""The egress proxy: the only way out of a CLI executor's jail, and the only
place its API key exists.

soda runs it outside the jail, on a unix socket in a private directory that is
bound into the jail (`launcher.py` forwards the jail's loopback port to it).
The CLI inside holds a placeholder key. For each request the proxy

- refuses (403, recorded as an `executor.refused` event) anything but the
  provider's model endpoints (`Route.paths`), and any call once a budget is
  spent (400: a clear error the CLI stops on, not a retry);
- replaces whatever credential the CLI sent with the real one and forwards the
  request to the provider, relaying the answer as it streams;
- meters the answer (`usage.Meter`) and records it like any model call of the
  built-in agent: a row in `agent_calls` (tokens, cost from soda's price table,
  latency), an `agent.turn` event, the budget checked (`CallRecorder`);
- counts failed answers (5xx, 429, no connection) in a row: past the limit the
  task's watchdog ends the CLI (`failing`), which would retry for minutes;
- reads a rate limit's reset from a 429's headers (soda.llm.ratelimits): one
  further away than `limit_after` (the retry budget) is spent (`limited_until`):
  no further call leaves (each gets a 429 from the proxy itself) and the
  watchdog ends the CLI, so soda can wait it out without a model call.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import socketserver
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Protocol

import httpx

from soda.agent.backends.usage import Api, Meter
from soda.errors import BudgetExhausted
from soda.llm.base import ModelRequest, ModelResponse
from soda.llm.ratelimits import anthropic_wait, openai_wait

SOCKET_NAME = "proxy.sock"
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
     "upgrade", "host", "content-length", "accept-encoding", "x-api-key", "authorization"}
)  # fmt: skip
"""Request headers never forwarded: hop-by-hop ones, and every credential."""
PASSED_BACK = ("content-type", "request-id", "x-request-id", "retry-after", "openai-processing-ms")


@dataclass(frozen=True)
class Route:
    """Where a CLI's model calls go and how they are authorized."""

    upstream: str
    """The provider's origin (scheme, host, port, optional prefix), no trailing slash."""
    paths: frozenset[str]
    """Request paths (without the query) that are model calls; nothing else passes."""
    api: Api
    key_header: str
    """"x-api-key" (Anthropic) or "authorization" (sent as `Bearer <key>`)."""
    provider: str
    """Its name in `agent_calls`: "anthropic" or "openai"."""


class Record(Protocol):
    """The call recorder (`CallRecorder`, behind ACT's lock)."""

    def __call__(
        self,
        agent: str,
        response: ModelResponse,
        turn: int,
        request: ModelRequest | None = None,
        provider: str | None = None,
        endpoint: str | None = None,
    ) -> None: ...


Emit = Callable[[str, dict[str, Any]], None]


class EgressProxy:
    """One task's proxy: start it, bind `directory` into the jail, close it after."""

    def __init__(
        self,
        route: Route,
        key: str,
        agent: str,
        record: Record,
        emit: Emit,
        read_timeout: float = 600.0,
        max_failures: int = 5,
        limit_after: float = 120.0,
    ) -> None:
        self.route = route
        self.agent = agent
        self._key = key
        self._record = record
        self._emit = emit
        self.max_failures = max_failures
        self.directory = Path(tempfile.mkdtemp(prefix="soda-egress-"))
        os.chmod(self.directory, 0o700)
        self.socket_path = self.directory / SOCKET_NAME
        self.calls = 0
        self.refused: list[str] = []
        self.budget: BudgetExhausted | None = None
        """Set when a call spent a budget: every later call is refused."""
        self.failing = ""
        """Set when the provider failed `max_failures` times in a row."""
        self.limit_after = limit_after
        self.limited_until: float | None = None
        """When a spent rate limit resets (seconds since the epoch), once a 429
        said it resets later than `limit_after` from then."""
        self._failures = 0
        self._closed = False
        self._open: set[httpx.Response] = set()
        """Answers still streaming: closed with the proxy, so no thread outlives it."""
        self._lock = threading.Lock()
        self._client = httpx.Client(
            timeout=httpx.Timeout(read_timeout, connect=10.0), follow_redirects=False
        )
        self._server = _Server(str(self.socket_path), _Handler)
        self._server.proxy = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )  # a short poll: closing the proxy waits for it

    def start(self) -> EgressProxy:
        self._thread.start()
        return self

    def close(self) -> None:
        with self._lock:
            self._closed = True
            streaming = list(self._open)
        for response in streaming:  # a stalled upstream: its reader wakes and ends
            _hang_up(response)
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        self._client.close()
        with contextlib.suppress(OSError):
            self.socket_path.unlink()
        with contextlib.suppress(OSError):
            self.directory.rmdir()

    def stop_reason(self) -> str | None:
        """Why the CLI should be ended now (a spent budget, a failing provider)."""
        if self.budget is not None and self.refused:
            return f"budget: {self.budget}"
        if self.limited_until is not None:
            return "the provider's rate limit is spent"
        return self.failing or None

    # --- one request ----------------------------------------------------------

    def refuse(self, method: str, path: str, why: str) -> None:
        with self._lock:
            self.refused.append(f"{method} {path}")
        self._emit("executor.refused", {"method": method, "path": path[:200], "why": why})

    def forward(self, handler: _Handler, method: str, path: str, body: bytes) -> None:
        headers = {
            name: value for name, value in handler.headers.items()
            if name.lower() not in HOP_BY_HOP
        }  # fmt: skip
        if self.route.key_header == "x-api-key":
            headers["x-api-key"] = self._key
        else:
            headers["authorization"] = f"Bearer {self._key}"
        headers["accept-encoding"] = "identity"
        meter = Meter(self.route.api)
        started = time.monotonic()
        request = self._client.build_request(
            method, self.route.upstream + path, headers=headers, content=body
        )
        try:
            response = self._client.send(request, stream=True)
            with self._lock:
                self._open.add(response)
        except httpx.HTTPError as exc:
            self._failed(f"no answer from {self.route.upstream}: {type(exc).__name__}")
            handler.answer_json(
                502, "api_error", f"soda egress: the provider did not answer: {exc}"
            )
            return
        try:
            handler.start_stream(response.status_code, response.headers)
            for chunk in response.iter_raw():
                meter.feed(chunk)
                handler.write_chunk(chunk)
            meter.finish()
            latency = int((time.monotonic() - started) * 1000)
            # Recorded before the answer ends: the CLI's next call sees the budget.
            if response.status_code == 200 and (meter.model or meter.usage.total):
                self._succeeded(meter, latency)  # a model call (not a token count)
            elif response.status_code >= 500 or response.status_code == 429:
                self._failed(f"the provider answered {response.status_code}")
                if response.status_code == 429:
                    self._rate_limited(response.headers)
            handler.end_stream()
        except httpx.HTTPError as exc:  # the provider's side broke
            self._failed(f"the answer broke off: {type(exc).__name__}")
            handler.close_connection = True
        except OSError:  # the CLI hung up (it was ended): not the provider's failure
            handler.close_connection = True
        finally:
            response.close()
            with self._lock:
                self._open.discard(response)

    def _succeeded(self, meter: Meter, latency: int) -> None:
        with self._lock:
            self._failures = 0
            self.calls += 1
            turn = self.calls
        answer = ModelResponse(
            text="",
            tool_calls=[],
            stop_reason=meter.stop_reason or "unknown",
            usage=meter.usage,
            model=meter.model or "unknown",
            raw={"via": "egress proxy", "api": self.route.api, "error": meter.error or None},
            latency_ms=latency,
        )
        try:
            self._record(self.agent, answer, turn, None, self.route.provider, self.route.upstream)
        except BudgetExhausted as exc:
            with self._lock:
                self.budget = exc

    def _rate_limited(self, headers: httpx.Headers) -> None:
        """A 429: its limit is spent when it resets beyond the retry budget."""
        wait = (anthropic_wait if self.route.api == "messages" else openai_wait)(headers)
        if wait is not None and wait > self.limit_after:
            with self._lock:
                self.limited_until = time.time() + wait
            self._emit("executor.rate_limited", {"seconds": round(wait, 1)})

    def _failed(self, why: str) -> None:
        with self._lock:
            if self._closed:  # the task is over: nothing more to say about it
                return
            self._failures += 1
            failures = self._failures
            if failures >= self.max_failures and not self.failing:
                self.failing = f"the model API failed {failures} times in a row ({why})"
        self._emit("executor.api_error", {"why": why, "in_a_row": failures})


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    proxy: EgressProxy


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: what matters is recorded as events and rows."""

    def address_string(self) -> str:
        return "jail"

    def do_POST(self) -> None:
        self._handle("POST")

    def do_GET(self) -> None:
        self._handle("GET")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def do_HEAD(self) -> None:
        self._handle("HEAD")

    def _handle(self, method: str) -> None:
        proxy = self.server.proxy
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        path = self.path if self.path.startswith("/") else "/" + self.path
        if method != "POST" or path.split("?")[0] not in proxy.route.paths:
            proxy.refuse(method, path, "not a model endpoint")
            self.answer_json(403, "permission_error", "soda egress: only model calls pass")
            return
        if proxy.budget is not None:
            proxy.refuse(method, path, "budget spent")
            self.answer_json(400, "invalid_request_error", f"soda egress: {proxy.budget}")
            return
        if proxy.limited_until is not None:  # spent: no call leaves until it resets
            proxy.refuse(method, path, "rate limit spent")
            self.answer_json(429, "rate_limit_error", "soda egress: the rate limit is spent")
            return
        proxy.forward(self, method, path, body)

    def answer_json(self, status: int, kind: str, message: str) -> None:
        payload = json.dumps({"type": "error", "error": {"type": kind, "message": message}})
        data = payload.encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def start_stream(self, status: int, headers: httpx.Headers) -> None:
        self.send_response(status)
        for name in PASSED_BACK:
            if name in headers:
                self.send_header(name, headers[name])
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()

    def write_chunk(self, chunk: bytes) -> None:
        if chunk:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()

    def end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def _hang_up(response: httpx.Response) -> None:
    """Shut the socket under a streaming answer: a thread blocked reading it wakes
    (closing the response would wait for that thread)."""
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if isinstance(sock, socket.socket):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
