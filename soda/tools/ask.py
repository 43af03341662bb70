"""`ask_human`: an agent asks the person a question and its run waits for the
answer.

What the question does to the run differs by role (an executor's task pauses;
an ORIENT agent's question ends ORIENT), so the caller gives the description
the model reads (`soda.loop.asking`); ASK_HUMAN's is the generic one.

The tool stores the question through `ask` (which also announces it) and
suspends the run (`soda.tools.toolbox.Suspended`); the runner hands `keep` the
conversation so far, so the run can go on later with the person's answer as
this call's result instead of starting again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from soda.llm.base import Message, ToolResult, ToolSpec
from soda.tools.sandbox import ToolError
from soda.tools.toolbox import Suspended, Tool, described, object_schema

Ask = Callable[[str], int]
"""Stores and announces a question; returns its id."""
Keep = Callable[[int, list[Message], list[ToolResult], str], None]
"""Keeps question `id`'s conversation: messages, the turn's earlier results, the call id."""

MAX_QUESTION_CHARS = 2000

ASK_HUMAN = ToolSpec(
    "ask_human",
    "Ask the person a question only they can answer (a decision, a missing fact, a "
    "credential-free setup step). Your work pauses until they answer; the answer comes "
    "back as this tool's result. Ask one clear, self-contained question; do not ask "
    "what you can find out with your other tools.",
    object_schema(
        {
            "question": described(
                "string",
                f"The question, self-contained (the person has not seen your work), at most "
                f"{MAX_QUESTION_CHARS} characters.",
            )
        }
    ),
)


def ask_tools(ask: Ask, keep: Keep, description: str | None = None) -> list[Tool]:
    """`ask_human`, described by `description` (default ASK_HUMAN's)."""
    spec = ASK_HUMAN if description is None else replace(ASK_HUMAN, description=description)

    def handler(arguments: dict[str, Any]) -> str:
        question = " ".join(str(arguments["question"]).split())
        if not question:
            raise ToolError("the question is empty")
        if len(question) > MAX_QUESTION_CHARS:
            raise ToolError(f"the question is over {MAX_QUESTION_CHARS} characters; shorten it")
        question_id = ask(question)
        raise Suspended(
            question,
            lambda messages, results, call_id: keep(question_id, messages, results, call_id),
        )

    return [Tool(spec, handler)]
