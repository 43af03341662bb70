"""A behavioural fake model: answers computed from the request by a function.

In the spirit of pydantic-ai's `FunctionModel`: instead of replaying a fixed
list of responses (soda.llm.scripted), a test gives a function that looks at
the request (which agent asks, which tools it was offered, what the last tool
result said) and decides the answer. Reordering the loop's calls does not break
such a test; only a change of behaviour does.

    def answer(request: ModelRequest) -> Reply:
        if request.agent == "executor" and not request.messages[-1].tool_results:
            return call("write_file", path="calc.py", content="...")
        return submit({...})

    model = FunctionModel(answer)
    # or by agent: FunctionModel.by_agent({"verifier": ..., "executor": ...})

A reply is a `ModelResponse`, or a dict in the scripted provider's entry format
(`{"text": ..., "tool_calls": [{"name": ..., "input": {...}}], "stop_reason":
..., "usage": {...}}`). Only the request count and the last request are kept,
so long runs do not grow in memory.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Mapping
from typing import Any

from soda.errors import ScriptError
from soda.llm.base import ModelRequest, ModelResponse, ToolCall, Usage

Reply = ModelResponse | dict[str, Any]
Answer = Callable[[ModelRequest], Reply]


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    """A reply calling one tool with `arguments`."""
    return {"tool_calls": [{"name": tool, "input": arguments}]}


def submit(data: Mapping[str, Any]) -> dict[str, Any]:
    """A reply calling the terminal `submit` tool with `data`."""
    return {"tool_calls": [{"name": "submit", "input": dict(data)}]}


def last_results(request: ModelRequest) -> list[str]:
    """The contents of the tool results in the latest message (empty on turn 1)."""
    if not request.messages:
        return []
    return [result.content for result in request.messages[-1].tool_results]


def first_turn(request: ModelRequest) -> bool:
    """True when no tool has been called yet in this session."""
    return not any(message.tool_calls for message in request.messages)


class FunctionModel:
    """A Model whose answers come from `answer(request)`. Thread-safe."""

    provider = "function"

    def __init__(self, answer: Answer, name: str = "function") -> None:
        self.answer = answer
        self.name = name
        self.calls = 0
        self.last_request: ModelRequest | None = None
        self._ids = itertools.count()
        self._lock = threading.Lock()

    @classmethod
    def by_agent(cls, answers: Mapping[str, Answer]) -> FunctionModel:
        """One answer function per agent; an agent without one is a ScriptError."""

        def route(request: ModelRequest) -> Reply:
            handler = answers.get(request.agent)
            if handler is None:
                raise ScriptError(
                    f"the fake model has no answer for agent {request.agent} "
                    f"(it answers {', '.join(sorted(answers))})"
                )
            return handler(request)

        return cls(route)

    def complete(self, request: ModelRequest) -> ModelResponse:
        with self._lock:
            self.calls += 1
            self.last_request = request
        reply = self.answer(request)
        if isinstance(reply, ModelResponse):
            return reply
        return self._response(request, reply)

    def _response(self, request: ModelRequest, entry: dict[str, Any]) -> ModelResponse:
        offered = {tool.name for tool in request.tools}
        calls = []
        for item in entry.get("tool_calls", []):
            name = item.get("name")
            if name not in offered:
                raise ScriptError(
                    f"the fake model called tool {name!r}, which agent {request.agent} "
                    f"does not have ({', '.join(sorted(offered))})"
                )
            with self._lock:
                number = next(self._ids)
            calls.append(ToolCall(id=f"fn-{number}", name=name, input=item.get("input", {})))
        stop_reason = entry.get("stop_reason") or ("tool_use" if calls else "end_turn")
        return ModelResponse(
            text=entry.get("text", ""),
            tool_calls=calls,
            stop_reason=stop_reason,
            usage=Usage(**entry.get("usage", {})),
            model=request.model,
            raw={"function": self.name, **entry},
            truncated=stop_reason == "max_tokens",
        )
