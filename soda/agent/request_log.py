"""`model.log_requests`: what the model was sent and what it answered, kept in
`state/requests/N.jsonl` (one file per iteration N) for `soda show N --requests`.

One line per model call. A call that starts an agent run (turn 1) keeps the
whole request: the system prompt, the tools offered and every message; a later
turn keeps only what is new in it, the last message (the results of the calls
the model made), since the rest was logged by the turns before it, and the
model's own turns are the logged responses. So a run of T turns costs O(T) lines,
not O(T^2). Only the newest `model.log_requests_keep` iterations are kept.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Any

from soda.llm.base import ModelRequest, ModelResponse

DIR_NAME = "requests"


def log_path(state_dir: Path, number: int) -> Path:
    return state_dir / DIR_NAME / f"{number}.jsonl"


class RequestLog:
    """Appends the calls of iteration `number` (thread-safe: an iteration's
    tasks run side by side)."""

    def __init__(self, state_dir: Path, number: int, keep: int) -> None:
        self.path = log_path(state_dir, number)
        self.keep = keep
        self._lock = threading.Lock()
        self._pruned = False

    def write(self, agent: str, turn: int, request: ModelRequest, response: ModelResponse) -> None:
        line = json.dumps(entry(agent, turn, request, response), default=str)
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(line + "\n")
            if not self._pruned:
                self._pruned = True
                prune(self.path.parent, self.keep)


def entry(agent: str, turn: int, request: ModelRequest, response: ModelResponse) -> dict[str, Any]:
    """One call as it is logged (see the module docstring for what a turn keeps)."""
    record: dict[str, Any] = {"agent": agent, "turn": turn, "model": request.model}
    if turn == 1:
        record["system"] = request.system
        record["tools"] = [tool.name for tool in request.tools]
        record["messages"] = [_message(m) for m in request.messages]
    else:
        record["messages"] = [_message(m) for m in request.messages[-1:]]
    record["max_tokens"] = request.max_tokens
    record["must_call"] = list(request.must_call)
    record["response"] = {
        "text": response.text,
        "tool_calls": [asdict(call) for call in response.tool_calls],
        "stop_reason": response.stop_reason,
        "usage": asdict(response.usage),
    }
    return record


def _message(message: Any) -> dict[str, Any]:
    data = asdict(message)
    data.pop("cache_breaks", None)
    return {key: value for key, value in data.items() if value not in ("", [], None)}


def prune(directory: Path, keep: int) -> None:
    """Keep the newest `keep` iterations' logs (by iteration number)."""
    files = sorted(
        (p for p in directory.glob("*.jsonl") if p.stem.isdigit()), key=lambda p: int(p.stem)
    )
    for old in files[: max(len(files) - keep, 0)]:
        old.unlink(missing_ok=True)


def read(state_dir: Path, number: int) -> list[dict[str, Any]]:
    """The logged calls of iteration `number`, oldest first ([] when none)."""
    path = log_path(state_dir, number)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def render(calls: list[dict[str, Any]]) -> str:
    """The calls for people: each request's new messages, then the answer."""
    lines: list[str] = []
    for call in calls:
        lines.append(f"── {call['agent']} · turn {call['turn']} · {call['model']} ──")
        if "system" in call:
            lines.append(f"system ({len(call['system'])} chars):")
            lines.extend(f"  {line}" for line in call["system"].splitlines())
            lines.append(f"tools: {', '.join(call['tools']) or '(none)'}")
        for message in call["messages"]:
            lines.extend(_message_lines(message))
        answer = call["response"]
        lines.append(f"answer ({answer['stop_reason']}):")
        if answer["text"]:
            lines.extend(f"  {line}" for line in answer["text"].splitlines())
        for tool_call in answer["tool_calls"]:
            lines.append(f"  -> {tool_call['name']} {json.dumps(tool_call['input'])}")
        lines.append("")
    return "\n".join(lines).rstrip()


def _message_lines(message: dict[str, Any]) -> list[str]:
    lines = [f"{message['role']}:"]
    lines.extend(f"  {line}" for line in message.get("text", "").splitlines())
    for call in message.get("tool_calls", []):
        lines.append(f"  -> {call['name']} {json.dumps(call['input'])}")
    for result in message.get("tool_results", []):
        mark = "error" if result.get("is_error") else "result"
        lines.append(f"  <- {mark} [{result['call_id']}]:")
        lines.extend(f"     {line}" for line in result["content"].splitlines())
    return lines
