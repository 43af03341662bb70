"""The scripted provider: replays a list of model responses, for tests and the demo.

A script is a JSON file:

    {"note": "why this script exists",
     "responses": [
        {"agent": "verifier", "text": "optional prose",
         "tool_calls": [{"name": "read_file", "input": {"path": "calc.py"}}]},
        {"agent": "verifier", "tool_calls": [{"name": "submit", "input": {...}}]}
     ]}

An entry may set `"stop_reason": "max_tokens"` to stand for an answer cut off at
the output limit (it comes back `truncated`). Responses are served in order,
whichever agent asks. `agent` is optional; when
given, a request from another agent is a ScriptError, so a script that has
drifted from the loop fails at once and says where. The script running out, a
tool the request does not offer, or a scripted tool call that the tools refused
(an `is_error` result) are ScriptErrors too: a replay must go exactly as written.
An answer the runtime handed back (it broke its contract) is not: the script's
next entry answers it, as a model given its second chance would.
An entry may set `"iteration": N`: iteration N's first answer. A model whose
first request is for a marked iteration starts there, so a run that goes on in
another process (a fleet run moved to another worker) goes on from its place in
the script; a model that has answered before goes on in order, marks or not.
A script may set `"latency_seconds": 1.0` beside its responses: each answer
then takes that long, as a real model's would (the fleet's bench and tests).
The latest requests (up to 200) are kept in `requests` so tests can assert on
what was asked, without a long run growing in memory.
"""

from __future__ import annotations

import json
import time
from collections import deque
from pathlib import Path
from typing import Any

from soda.errors import InputError, ScriptError
from soda.llm.base import ModelRequest, ModelResponse, ToolCall, Usage

KEPT_REQUESTS = 200
"""Requests a ScriptedModel remembers (the newest)."""


class ScriptedModel:
    """A Model that answers from a script instead of a network."""

    provider = "scripted"

    def __init__(
        self, responses: list[dict[str, Any]], source: str = "<inline>", latency: float = 0.0
    ) -> None:
        self.responses = responses
        self.source = source
        self.latency = latency
        self.position = 0
        self.requests: deque[ModelRequest] = deque(maxlen=KEPT_REQUESTS)
        self.starts = iteration_starts(responses, source)
        """Iteration number -> the index of its first answer (the `iteration` marks)."""

    @classmethod
    def from_file(cls, path: Path) -> ScriptedModel:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"{path}: cannot read the model script: {exc}") from exc
        responses = data.get("responses") if isinstance(data, dict) else None
        if not isinstance(responses, list):
            raise InputError(f'{path}: a model script is an object with a "responses" list')
        latency = data.get("latency_seconds", 0.0)
        if not isinstance(latency, int | float) or latency < 0:
            raise InputError(f"{path}: latency_seconds is a number of seconds, 0 or more")
        return cls(responses, source=str(path), latency=float(latency))

    def complete(self, request: ModelRequest) -> ModelResponse:
        if not self.requests and request.iteration is not None:  # it starts mid-run
            self.position = self.starts.get(request.iteration, self.position)
        self.requests.append(request)
        self._check_previous_calls(request)
        if self.latency:
            time.sleep(self.latency)
        if self.position >= len(self.responses):
            raise ScriptError(
                f"model script {self.source} ran out after {len(self.responses)} responses "
                f"(agent {request.agent} asked for one more)"
            )
        index = self.position
        entry = self.responses[index]
        self.position += 1
        expected = entry.get("agent")
        if expected and expected != request.agent:
            raise ScriptError(
                f"model script {self.source} response {index} is for agent {expected}, "
                f"but agent {request.agent} asked"
            )
        calls = [
            self._tool_call(request, index, n, call)
            for n, call in enumerate(entry.get("tool_calls", []))
        ]
        usage = Usage(**entry.get("usage", {}))
        stop_reason = entry.get("stop_reason") or ("tool_use" if calls else "end_turn")
        return ModelResponse(
            text=entry.get("text", ""),
            tool_calls=calls,
            stop_reason=stop_reason,
            usage=usage,
            model=request.model,
            raw={"scripted": True, "index": index, **entry},
            truncated=stop_reason == "max_tokens",
        )

    def _tool_call(
        self, request: ModelRequest, index: int, number: int, call: dict[str, Any]
    ) -> ToolCall:
        offered = {tool.name for tool in request.tools}
        name = call.get("name")
        if name not in offered:
            raise ScriptError(
                f"model script {self.source} response {index} calls tool {name!r}, "
                f"which agent {request.agent} does not have ({', '.join(sorted(offered))})"
            )
        if len(request.must_call) == 1 and name != request.must_call[0]:
            # The API forces a single named tool; a script must not do what it cannot.
            raise ScriptError(
                f"model script {self.source} response {index} calls tool {name!r}, "
                f"but agent {request.agent} was made to call {request.must_call[0]!r}"
            )
        return ToolCall(id=f"script-{index}-{number}", name=name, input=call.get("input", {}))

    def _check_previous_calls(self, request: ModelRequest) -> None:
        if not request.messages:
            return
        # The runtime's feedback on an answer (a contract slip handed back) is part
        # of a replay a script can plan for: the next entry answers it.
        answers = {
            call.id
            for message in request.messages
            for call in message.tool_calls
            if call.name == request.answer_tool
        }
        for result in request.messages[-1].tool_results:
            if result.is_error and result.call_id not in answers:
                raise ScriptError(
                    f"model script {self.source}: a scripted tool call was refused "
                    f"(response {self.position - 1}): {result.content}"
                )


def iteration_starts(responses: list[dict[str, Any]], source: str) -> dict[int, int]:
    """Where each marked iteration's answers begin; InputError for a bad mark."""
    starts: dict[int, int] = {}
    for index, entry in enumerate(responses):
        mark = entry.get("iteration") if isinstance(entry, dict) else None
        if mark is None:
            continue
        if not isinstance(mark, int) or isinstance(mark, bool) or mark < 1 or mark in starts:
            raise InputError(
                f"{source}: response {index}: iteration is the number of the iteration"
                " it begins, 1 or more, once per iteration"
            )
        starts[mark] = index
    return starts
