"""The egress proxy on its own: only model calls pass, the credential is always
the real one (whatever the CLI sent), each call is metered and recorded, a
token count is not a call, and closing it ends a stalled answer's thread."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from soda.agent.backends.proxy import EgressProxy, Route
from soda.llm.base import ModelRequest, ModelResponse
from tests.conftest import wait_for
from tests.fakestream import StreamAPI, call, say, stall_after_start


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("jail", timeout=10)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


class Calls:
    def __init__(self) -> None:
        self.recorded: list[tuple[str, ModelResponse, int, str | None]] = []
        self.endpoints: list[str | None] = []
        self.events: list[tuple[str, dict[str, Any]]] = []

    def record(
        self,
        agent: str,
        response: ModelResponse,
        turn: int,
        request: ModelRequest | None = None,
        provider: str | None = None,
        endpoint: str | None = None,
    ) -> None:
        self.recorded.append((agent, response, turn, provider))
        self.endpoints.append(endpoint)

    def emit(self, kind: str, data: dict[str, Any]) -> None:
        self.events.append((kind, data))


@pytest.fixture
def api() -> Iterator[StreamAPI]:
    server = StreamAPI(lambda seen: call("Bash", {"command": "ls"}, text="looking"))
    yield server.start()
    server.close()


def proxy_for(api: StreamAPI, calls: Calls) -> EgressProxy:
    paths = frozenset({"/v1/messages", "/v1/messages/count_tokens"})
    route = Route(api.url, paths, "messages", "x-api-key", "anthropic")
    return EgressProxy(route, "sk-real", "executor:test", calls.record, calls.emit).start()


def post(proxy: EgressProxy, path: str, body: dict[str, Any], **headers: str) -> tuple[int, bytes]:
    connection = UnixConnection(str(proxy.socket_path))
    connection.request("POST", path, json.dumps(body).encode(), headers)
    response = connection.getresponse()
    return response.status, response.read()


def test_a_model_call_gets_the_real_key_and_is_recorded(api: StreamAPI) -> None:
    calls = Calls()
    proxy = proxy_for(api, calls)
    try:
        body = {"model": "claude-sonnet-4-6", "stream": True, "messages": []}
        status, data = post(
            proxy, "/v1/messages?beta=true", body, **{"x-api-key": "sk-placeholder",
                                                      "authorization": "Bearer stolen"}
        )  # fmt: skip
        assert status == 200 and b"message_stop" in data and b"looking" in data
        (seen,) = api.requests
        assert seen.headers["x-api-key"] == "sk-real" and "authorization" not in seen.headers
        ((agent, response, turn, provider),) = calls.recorded
        assert (agent, turn, provider, response.model) == (
            "executor:test",
            1,
            "anthropic",
            "claude-sonnet-4-6",
        )
        assert calls.endpoints == [api.url]  # priced by where it went (here: loopback, free)
        usage = response.usage
        assert (usage.input_tokens, usage.output_tokens) == (1200, 60)
        assert (usage.cache_read_tokens, usage.cache_creation_tokens) == (300, 100)
        assert response.stop_reason == "tool_use"
        status, _ = post(proxy, "/v1/messages/count_tokens", {"model": "m", "messages": []})
        assert status == 200 and len(calls.recorded) == 1  # a count is not a model call
    finally:
        proxy.close()


def test_anything_but_a_model_call_is_refused_and_recorded(api: StreamAPI) -> None:
    calls = Calls()
    proxy = proxy_for(api, calls)
    try:
        status, data = post(proxy, "/v1/files", {})
        assert status == 403 and b"only model calls pass" in data
        connection = UnixConnection(str(proxy.socket_path))
        connection.request("GET", "/v1/messages")
        assert connection.getresponse().status == 403
        assert not api.requests  # nothing reached the provider
        assert [d["path"] for k, d in calls.events if k == "executor.refused"] == [
            "/v1/files", "/v1/messages"
        ]  # fmt: skip
        assert proxy.refused == ["POST /v1/files", "GET /v1/messages"]
    finally:
        proxy.close()


def test_closing_the_proxy_ends_a_stalled_answer() -> None:
    api = StreamAPI(lambda seen: stall_after_start()).start()
    calls = Calls()
    proxy = proxy_for(api, calls)
    result: list[object] = []

    def ask() -> None:
        try:
            result.append(post(proxy, "/v1/messages", {"model": "m", "stream": True}))
        except Exception as exc:
            result.append(exc)

    asker = threading.Thread(target=ask, daemon=True)
    asker.start()
    wait_for(lambda: api.requests, 10, "the call to reach the provider")
    proxy.close()
    try:  # the proxy's thread stopped waiting on the provider and hung up on the CLI
        wait_for(lambda: result, 5, "the proxy to end the stalled answer")
        asker.join(5)
        assert not asker.is_alive()
    finally:
        api.close()
    # What the provider had begun to answer is billed: recorded, not a failure.
    assert [r[1].usage.input_tokens for r in calls.recorded] == [1200]
    assert not [k for k, _ in calls.events if k == "executor.api_error"]


def test_say_is_metered_too(api: StreamAPI) -> None:
    api.respond = lambda seen: say("done")
    calls = Calls()
    proxy = proxy_for(api, calls)
    try:
        post(proxy, "/v1/messages", {"model": "claude-haiku-4-5", "stream": True})
        ((_, response, _, _),) = calls.recorded
        assert response.model == "claude-haiku-4-5" and response.stop_reason == "end_turn"
    finally:
        proxy.close()
