"""Questions to the person: an executor's `ask_human`, bound to its task.

    asked      stored (`soda.store.questions`, status open), event `question.asked`,
               `[daemon] notify_command` run with SODA_EVENT=QUESTION, a Trace
               comment; the executor's run is suspended: its conversation, the task
               and its work so far (a commit under refs/soda/questions/ID, which
               survives a restart) are kept with the question
    answered   `soda answer Q "text"` or an inbox file (kind answer, target Q),
               recorded at SENSE
    resumed    the next iteration skips ORIENT (`resume_orientation`: a plan of the
               answered tasks, no replanning); each task's first attempt takes its
               work back (`take_resume`) and the executor goes on from its kept
               conversation, the answer as the `ask_human` call's result

A plan suspended for a person's approval (`[approval] wait = "suspend"`) goes
on the same way: the next iteration skips ORIENT with that plan
(`approval_orientation`) and ACT takes the verdict; so do merges held for
approval (the plan of their tasks, whose kept work ACT restores once approved).

ORIENT's agents ask through `orient_ask_tools`: their question ends ORIENT
(`asked_orientation`: STUCK until the answer), and the next ORIENT gets the
answers as an input (`person_answers`). Questions are rows, so an unanswered
one outlives the process. `open_questions`
is what `soda status` shows.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import git
from sqlite_utils import Database

from soda.contracts import IterationPlan, Orientation, PlanTask
from soda.events import notify
from soda.human.approval import waiting_subject
from soda.llm.base import Message, ToolCall, ToolResult
from soda.repo.workspace import Workspace
from soda.store import questions
from soda.store.approvals import Approval
from soda.store.db import dumps
from soda.store.questions import Question
from soda.tools.ask import ask_tools
from soda.tools.toolbox import Tool

if TYPE_CHECKING:
    from soda.loop.context import Iteration
    from soda.loop.session import Session

RESUME_REF = "refs/soda/questions/{}"
"""Where a waiting task's work so far is kept, by question id."""
NOT_RUN = "not run: your work paused for a question to the person; call it again if needed"

ORIENT_ASK = (
    "Ask the person who owns the spec one question only they can answer: a decision "
    "the spec leaves open, a fact that is in no file, a step outside the repository. "
    "Calling it ends this orientation at once: nothing is planned, and the iteration "
    "stops as STUCK until the person answers; the next orientation starts afresh with "
    "the answer among its inputs. So look first, ask one clear, self-contained question, "
    "and never ask what the code, the tests or the claims can tell you. When a person "
    "is needed but there is no one question to ask, answer with stuck_reason instead."
)
"""`ask_human` as ORIENT's agents that plan (planner, orienter) are told it."""
EXECUTOR_ASK = (
    "Ask the person a question only they can answer, when your task cannot go on "
    "without it: a decision the spec and the task leave open, a fact that is in no file. "
    "Your run pauses (your work so far is kept, the other tasks go on) and resumes from "
    "this call when the person answers, which may take hours; the answer comes back as "
    "this tool's result. Ask one clear, self-contained question, and never ask what "
    "you can find out with your other tools. If the task cannot be done as described "
    "whatever the answer (it is wrong, or needs work that is missing), call "
    "cannot_complete instead."
)
"""`ask_human` as the executor is told it."""

__all__ = [
    "Question",
    "Resume",
    "answers_used",
    "approval_orientation",
    "asked_orientation",
    "executor_ask_tools",
    "open_questions",
    "orient_ask_tools",
    "person_answers",
    "resume_orientation",
    "resumed_conversation",
    "take_resume",
    "waiting_for_answers",
]


def open_questions(db: Database, branch: str | None = None) -> list[Question]:
    """Questions waiting for a person, oldest first; with `branch`, those asked on
    that milestone (the daemon's tracker runs one milestone per issue in one
    database: another issue's question is not this run's)."""
    return questions.open_questions(db, branch)


def waiting_for_answers(db: Database, branch: str | None = None) -> dict[str, str]:
    """The planner's note on tasks waiting for a person's answer (they resume when
    it comes, so they are not planned again); nothing when none waits."""
    waiting = [q for q in open_questions(db, branch) if q.task_key is not None]
    if not waiting:
        return {}
    lines = [
        f"- Trace task {q.task_id} ({q.task_key}), question {q.id}: {q.question}" for q in waiting
    ]
    return {
        "waiting_for_answers": "These tasks wait for a person's answer and resume when it "
        "comes; do not plan them (nor work that needs the answer):\n" + "\n".join(lines)
    }


def orient_ask_tools(session: Session, it: Iteration) -> list[Tool]:
    """`ask_human` for ORIENT's agents that plan (the verifier and the assessor
    are not given it: a fast model's question would stop an unattended daemon for
    what a planner could still do). Their question ends ORIENT (the iteration
    is STUCK until the answer comes, see `asked_orientation`); the next ORIENT
    starts afresh with the answer among its inputs (`person_answers`)."""

    def ask(question: str) -> int:
        question_id = questions.ask(
            session.db,
            iteration_id=it.id,
            iteration=it.number,
            agent="orient",
            question=question,
        )
        _announce(session, it, question_id, question, {})
        return question_id

    return ask_tools(ask, lambda question_id, messages, results, call_id: None, ORIENT_ASK)


def _announce(
    session: Session, it: Iteration, question_id: int, question: str, extra: dict[str, Any]
) -> None:
    """A stored question told: the `question.asked` event and `[daemon] notify_command`."""
    data = {"question": question_id, "plan": it.number, **extra, "text": question}
    it.events.emit("question.asked", data)
    reason = f'question {question_id}: {question} (answer: soda answer {question_id} "...")'
    notify(session.config, "QUESTION", it.number, reason, it.events)


def asked_orientation(question: str) -> Orientation:
    """ORIENT's result when one of its agents asked the person: nothing can be
    planned until the answer comes (DECIDE stops as STUCK with the question)."""
    return Orientation(
        spec_satisfied=False,
        actionable_work_exists=False,
        confidence="low",
        summary=f"waiting for the person's answer: {question}",
        task_updates=[],
        new_tasks=[],
        gaps=[],
        iteration_plan=None,
        stuck_reason=f"an ORIENT agent asked: {question} (see `soda status`, then `soda answer`)",
        learnings=[],
        learning_verdicts=[],
    )


def person_answers(db: Database, branch: str | None = None) -> dict[str, str]:
    """ORIENT's input with the answers to its agents' questions on milestone
    `branch` (read, not spent: a plan-only preview leaves them for the next real
    ORIENT); nothing when there are none."""
    answered = [q for q in questions.answered(db, branch) if q.agent == "orient"]
    if not answered:
        return {}
    lines = [f"- Q{q.id}: {q.question}\n  A: {q.answer}" for q in answered]
    return {"answers_from_the_person": "You asked; the person answered:\n" + "\n".join(lines)}


def answers_used(db: Database, branch: str | None = None) -> None:
    """The answers `person_answers` gave ORIENT are spent (settled as resumed)."""
    for question in questions.answered(db, branch):
        if question.agent == "orient":
            questions.settle(db, question.id, "resumed")


def executor_ask_tools(
    session: Session, it: Iteration, task: PlanTask, ws: Workspace
) -> list[Tool]:
    """The `ask_human` tool for the executor of one task of the plan, working in `ws`."""

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
        if task.task_id is not None:
            session.tracker.comment(
                task.task_id, "executor", f"asked (question {question_id}): {question}", it.id
            )
        _announce(session, it, question_id, question, {"key": task.id})
        return question_id

    def keep(
        question_id: int, messages: list[Message], results: list[ToolResult], call_id: str
    ) -> None:
        # The work so far as a commit under a ref of its own: recovery deletes
        # soda-work/* branches after a restart, this one stays.
        commit = ws.commit_all(f"{task.title} (unfinished)\n\nWaiting for question {question_id}")
        commit = commit or ws.head()
        ws.repo.git.update_ref(RESUME_REF.format(question_id), commit)
        stored = conversation_json(messages, results, call_id)
        stored.update(
            task=task.model_dump(mode="json"), commit=commit, base=ws.fork_point, branch=ws.branch
        )
        questions.keep_conversation(session.db, question_id, dumps(stored))

    return ask_tools(ask, keep, EXECUTOR_ASK)


@dataclass(frozen=True)
class Resume:
    """An answered question's task, ready to go on: its conversation with the answer
    and the commit holding its work so far."""

    question_id: int
    messages: list[Message]
    commit: str
    base: str

    def restore(self, ws: Workspace) -> None:
        """Put the task's work so far into `ws` (a fresh work tree on the tip); when
        the milestone moved meanwhile, the fork point is the old tip, so the merge
        brings the new tip in."""
        ws.reset_to(self.commit)
        if self.base != ws.fork_point:
            ws.fork_point = self.base
        with contextlib.suppress(git.GitCommandError):
            ws.repo.git.update_ref("-d", RESUME_REF.format(self.question_id))


def resume_orientation(session: Session, it: Iteration) -> Orientation | None:
    """ORIENT's place when questions were answered: the waiting tasks as the plan,
    not replanned. None when there is nothing to resume. An answered question
    that cannot be resumed (nothing was kept) is closed; its task is replanned."""
    tasks: list[PlanTask] = []
    for question in questions.answered(session.db, session.milestone.branch):
        if question.agent == "orient":
            continue  # for the next ORIENT (`person_answers`)
        stored = _stored(question)
        if stored is None or "task" not in stored or question.task_id is None:
            questions.settle(session.db, question.id, "closed")
            it.events.emit("question.closed", {"question": question.id})
            continue
        task = PlanTask.model_validate(stored["task"])
        if task.id in {t.id for t in tasks}:
            task = task.model_copy(update={"id": f"{task.id}-q{question.id}"})
        tasks.append(task.model_copy(update={"depends_on": []}))
    if not tasks:
        return None
    summary = f"resuming {len(tasks)} task(s) that waited for a person's answer"
    return Orientation(
        spec_satisfied=False,
        actionable_work_exists=True,
        confidence="medium",
        summary=summary,
        task_updates=[],
        new_tasks=[],
        gaps=[],
        iteration_plan=IterationPlan(
            intent=f"Resume after answers: {', '.join(t.title for t in tasks)}",
            approach="Each task goes on from where it asked, with the person's answer.",
            tasks=tasks,
        ),
        stuck_reason=None,
        learnings=[],
        learning_verdicts=[],
    )


def approval_orientation(waiting: Approval) -> Orientation:
    """ORIENT's place when a plan (or a merge) waits for approval (`[approval]
    wait = "suspend"`): that plan again (or the plan of the held merges' tasks),
    not replanned; ACT takes the verdict on it."""
    plan = IterationPlan.model_validate_json(waiting.plan_json)
    return Orientation(
        spec_satisfied=False,
        actionable_work_exists=True,
        confidence="medium",
        summary=f"{waiting_subject(waiting)} waits for approval: acting on the answer",
        task_updates=[],
        new_tasks=[],
        gaps=[],
        iteration_plan=plan,
        stuck_reason=None,
        learnings=[],
        learning_verdicts=[],
    )


def take_resume(session: Session, it: Iteration, task: PlanTask) -> Resume | None:
    """The answered question `task` waited for, taken (status resumed): the task's
    first attempt goes on from it. None when the task waited for nothing."""
    if task.task_id is None:
        return None
    for question in questions.answered(session.db, session.milestone.branch):
        stored = _stored(question)
        messages = resumed_conversation(question)
        if question.task_id != task.task_id or stored is None or messages is None:
            continue
        questions.settle(session.db, question.id, "resumed")
        it.events.emit("question.resumed", {"question": question.id, "key": task.id})
        _release_kept(session, stored)
        return Resume(question.id, messages, stored["commit"], stored["base"])
    return None


def _release_kept(session: Session, stored: dict[str, Any]) -> None:
    """Give back the work tree this process kept for the waiting task (its work
    is in the question's commit); after a restart there is none."""
    path = session.checkouts.kept().get(stored.get("branch", ""))
    if path is not None:
        base = stored["base"]
        session.checkouts.release(
            Workspace(session.repo, path, stored["branch"], session.milestone.branch, base)
        )


def _stored(question: Question) -> dict[str, Any] | None:
    return json.loads(question.conversation_json) if question.conversation_json else None


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
        "cache_breaks": list(m.cache_breaks),
        # Extended thinking goes back to the API unchanged with its turn's calls.
        "thinking": m.thinking,
    }


def _breaks(data: dict[str, Any]) -> tuple[int, ...]:
    """A saved message's cache breaks (a conversation saved by an older soda kept
    one, `stable_chars`)."""
    if "cache_breaks" in data:
        return tuple(int(n) for n in data["cache_breaks"])
    return (int(data["stable_chars"]),) if data.get("stable_chars") else ()


def _result(r: ToolResult) -> dict[str, Any]:
    return {"call_id": r.call_id, "content": r.content, "is_error": r.is_error}


def _message_from(data: dict[str, Any]) -> Message:
    return Message(
        role=data["role"],
        text=data["text"],
        tool_calls=[ToolCall(**c) for c in data["tool_calls"]],
        tool_results=[ToolResult(**r) for r in data["tool_results"]],
        cache_breaks=_breaks(data),
        thinking=data.get("thinking", []),
    )
