"""Questions to the person: an executor's `ask_human`, bound to its task.

    asked      stored (`soda.store.questions`, status open), event `question.asked`,
               `[daemon] notify_command` run with SODA_EVENT=QUESTION, a Trace comment;
               the executor's run is suspended and its conversation kept
    answered   `soda answer Q "text"` or an inbox file (kind answer, target Q)
    resumed    `resumed_conversation` is the kept conversation with the answer as
               the `ask_human` call's result: `AgentRunner.run(..., resume=)` goes on
               from there instead of starting the task again

Questions are rows, so an unanswered one outlives the process. `open_questions`
is what `soda status` shows.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from sqlite_utils import Database

from soda.daemon_parts import notify
from soda.llm.base import Message, ToolCall, ToolResult
from soda.store import questions
from soda.store.db import dumps
from soda.store.questions import Question
from soda.tools.ask import ask_tools
from soda.tools.toolbox import Tool

if TYPE_CHECKING:
    from soda.context import Iteration
    from soda.contracts import PlanTask
    from soda.session import Session

NOT_RUN = "not run: your work paused for a question to the person; call it again if needed"

__all__ = ["Question", "executor_ask_tools", "open_questions", "resumed_conversation"]


def open_questions(db: Database) -> list[Question]:
    """Questions waiting for a person, oldest first."""
    return questions.open_questions(db)


def executor_ask_tools(session: Session, it: Iteration, task: PlanTask) -> list[Tool]:
    """The `ask_human` tool for the executor of one task of the plan."""

    def ask(question: str) -> int:
        question_id = questions.ask(
            session.db,
            iteration_id=it.id,
            iteration=it.number,
            agent="executor",
            question=question,
            task_key=task.id,
            task_id=task.task_id,
        )
        data = {"question": question_id, "plan": it.number, "key": task.id, "text": question}
        session.events.emit("question.asked", data)
        if task.task_id is not None:
            session.tracker.comment(
                task.task_id, "executor", f"asked (question {question_id}): {question}", it.id
            )
        reason = f'question {question_id}: {question} (answer: soda answer {question_id} "...")'
        notify(session.config, "QUESTION", it.number, reason, session.events)
        return question_id

    def keep(
        question_id: int, messages: list[Message], results: list[ToolResult], call_id: str
    ) -> None:
        questions.keep_conversation(
            session.db, question_id, dumps(conversation_json(messages, results, call_id))
        )

    return ask_tools(ask, keep)


def conversation_json(
    messages: list[Message], results: list[ToolResult], call_id: str
) -> dict[str, Any]:
    """A suspended run, storable: its messages, the last turn's results before the
    question, and the id of the `ask_human` call waiting for the answer."""
    return {
        "messages": [_message(m) for m in messages],
        "results": [_result(r) for r in results],
        "call_id": call_id,
    }


def resumed_conversation(question: Question) -> list[Message] | None:
    """The kept conversation with the person's answer as the waiting call's result
    (calls after it in the same turn did not run, and say so); None when there is
    no conversation to resume (the task then starts again)."""
    if not question.conversation_json or question.answer is None:
        return None
    data = json.loads(question.conversation_json)
    messages = [_message_from(m) for m in data["messages"]]
    done = {r["call_id"]: ToolResult(**r) for r in data["results"]}
    done[data["call_id"]] = ToolResult(data["call_id"], f"The person answered: {question.answer}")
    calls = messages[-1].tool_calls if messages and messages[-1].role == "assistant" else []
    results = [done.get(call.id) or ToolResult(call.id, NOT_RUN, is_error=True) for call in calls]
    return [*messages, Message(role="user", tool_results=results)]


def _message(m: Message) -> dict[str, Any]:
    return {
        "role": m.role,
        "text": m.text,
        "tool_calls": [{"id": c.id, "name": c.name, "input": c.input} for c in m.tool_calls],
        "tool_results": [_result(r) for r in m.tool_results],
        "stable_chars": m.stable_chars,
    }


def _result(r: ToolResult) -> dict[str, Any]:
    return {"call_id": r.call_id, "content": r.content, "is_error": r.is_error}


def _message_from(data: dict[str, Any]) -> Message:
    return Message(
        role=data["role"],
        text=data["text"],
        tool_calls=[ToolCall(**c) for c in data["tool_calls"]],
        tool_results=[ToolResult(**r) for r in data["tool_results"]],
        stable_chars=data.get("stable_chars", 0),
    )
