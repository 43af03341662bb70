"""Keeping an agent's conversation within bounds: older tool results become
one-line summaries.

Two callers in `soda.agent.runtime`: a session that passes its token budget
(`[context] executor_session_tokens`) keeps its latest few tool results whole
and summarises the older ones; a prompt the model refused as too long keeps only
the latest turn's. A summary names the tool, its arguments, the size of what it
returned and its first line, and says the tool can be called again.
"""

from __future__ import annotations

import json
from dataclasses import replace

from soda.llm.base import Message, ToolCall, ToolResult

CONDENSE_ABOVE = 300
"""Tool results at most this long (characters) stay as they are when a history is
condensed: their summary would be no shorter (a summary is one line of under 300)."""
CHARS_PER_TOKEN = 4
"""The estimate used when the model has not counted: about 4 characters a token."""


def condense(messages: list[Message], keep: int = 1) -> tuple[list[Message], int] | None:
    """`messages` with every tool result longer than CONDENSE_ABOVE replaced by a
    one-line summary, except in the latest `keep` messages that carry tool
    results; and how many were replaced. None when nothing could be condensed."""
    calls: dict[str, ToolCall] = {call.id: call for m in messages for call in m.tool_calls}
    with_results = [i for i, m in enumerate(messages) if m.tool_results]
    whole = set(with_results[-keep:]) if keep > 0 else set()
    replaced = 0
    shorter: list[Message] = []
    for index, message in enumerate(messages):
        if index in whole or not message.tool_results:
            shorter.append(message)
            continue
        results = []
        for result in message.tool_results:
            if len(result.content) > CONDENSE_ABOVE:
                note = summary(calls.get(result.call_id), result)
                result = ToolResult(result.call_id, note, result.is_error)
                replaced += 1
            results.append(result)
        shorter.append(replace(message, tool_results=results))
    return (shorter, replaced) if replaced else None


def summary(call: ToolCall | None, result: ToolResult) -> str:
    """One line in place of a tool result: the call, the outcome, the size and the
    result's first line."""
    what = f"{call.name} {json.dumps(call.input, ensure_ascii=False)}" if call else "a tool call"
    what = _clip(what, 120)
    outcome = "failed with" if result.is_error else "returned"
    first = next((line.strip() for line in result.content.splitlines() if line.strip()), "")
    return (
        f"[condensed: {what} {outcome} {len(result.content):,} characters, "
        f"starting {json.dumps(_clip(first, 60), ensure_ascii=False)}; "
        "call it again if you need them]"
    )


def history_size(messages: list[Message]) -> int:
    """Characters of text, tool inputs and tool results in a conversation."""
    return sum(
        len(m.text)
        + sum(len(json.dumps(call.input)) for call in m.tool_calls)
        + sum(len(result.content) for result in m.tool_results)
        for m in messages
    )


def estimated_tokens(system: str, messages: list[Message], counted: int = 0) -> int:
    """Tokens the next request will send: the model's own count of the last prompt
    when it is higher (it knows its tokenizer), else characters / CHARS_PER_TOKEN."""
    return max(counted, (len(system) + history_size(messages)) // CHARS_PER_TOKEN)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
