"""`soda status`: what soda is doing here and what waits for a person.

Read from the lock (running or not, which pid), the database (the current
iteration and agent, pause, approvals, the last decision and the last error, the
budgets, the pull request) and the inbox (files soda rejected, with their
reasons). It works the same for a foreground `soda run` and the daemon, and
when neither runs.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from soda.agent import quota
from soda.config import Config
from soda.contracts import IterationPlan
from soda.forge import report as forge_report
from soda.forge.tracker import waiting
from soda.human import paused
from soda.human.approval import plan_risk, waiting_what
from soda.human.files import PROCESSED, REASON, REJECTED
from soda.human.write import inbox_dir
from soda.repo.milestone import milestone_branch
from soda.store import approvals, history, human_inputs, questions, runs
from soda.store import events as event_rows
from soda.store import tracker as tracker_rows
from soda.system.clock import moment
from soda.system.lifecycle import next_wake
from soda.system.lock import running_pid

REASON_BYTES = 1000
"""How much of a rejected file's `.reason` note status reads."""
REJECTED_SHOWN = 5
FINISHED_SHOWN = 5
"""Ended tracker issues `soda status --json` lists (the newest)."""
"""Rejected files listed by name in the text output (all are in --json)."""


@dataclass
class Status:
    """Everything `soda status` says; `to_json` is `soda status --json`."""

    pid: int | None
    iteration: int | None
    phase: str | None
    agent: str | None
    """The agent running now and its turn, e.g. "executor turn 4" (None between agents)."""
    paused: bool
    last_decision: str | None
    last_reason: str | None
    pending_inputs: int
    unread_inputs: int
    """Files in state/inbox/ that no soda has read yet (it reads them when it runs)."""
    pending_approval: dict[str, Any] | None
    """{"iteration": N, "subject": what waits} while a plan or merge waits for a person."""
    rejected_inputs: list[dict[str, str]]
    """{"file": name in inbox/rejected/, "reason": why}, newest first."""
    last_error: dict[str, Any] | None
    """{"at", "kind" (halt, error, aborted, transient), "reason", "iteration"}."""
    budgets: list[dict[str, Any]] = field(default_factory=list)
    questions: list[dict[str, Any]] = field(default_factory=list)
    """Open questions an agent asked the person: {"id", "iteration", "agent",
    "task", "question", "asked_at"}, oldest first."""
    next_wake: str | None = None
    """When the daemon wakes next, once it publishes that (it does not yet)."""
    pull_request: dict[str, Any] | None = None
    """The milestone's pull request ([forge]): its state, checks and the comments
    not yet answered (soda.forge.report)."""
    provider_wait: str | None = None
    """"waiting for the provider's limit until T" while the running iteration waits
    out a provider's rate limit (soda.agent.quota), making no model call."""
    tracker: dict[str, Any] | None = None
    """`[tracker] enabled`: {"in_progress": the issue being worked or None,
    "waiting": the queued issues in the order they will run, "finished": the
    latest ended ones}, each {"number", "title", "state", "branch", "pr",
    "depends", "last_word"}."""

    def to_json(self) -> dict[str, Any]:
        return {"running": self.pid is not None, **asdict(self)}

    def lines(self) -> list[str]:
        state = f"running (pid {self.pid})" if self.pid else "stopped"
        if self.pid and self.iteration:
            now = f"iteration {self.iteration}, phase {self.phase}"
            now += f", {self.agent}" if self.agent else ""
        else:
            now = "idle" if self.pid else "-"
        lines = [
            f"soda: {state}" + (", PAUSED (`soda resume` lets it iterate)" if self.paused else ""),
            f"now: {now}" + (f", {self.provider_wait}" if self.provider_wait else ""),
            f"last decision: {self.last_decision or '-'}"
            + (f" ({self.last_reason})" if self.last_reason else ""),
            f"pending human inputs: {self.pending_inputs}"
            + (f" (+{self.unread_inputs} unread in state/inbox/)" if self.unread_inputs else ""),
        ]
        if self.pending_approval:
            n = self.pending_approval["iteration"]
            lines.append(
                f"waiting for approval: iteration {n}, {self.pending_approval['subject']}"
                f" (`soda approve {n}` or `soda reject {n}`)"
            )
        lines += [
            f"question #{q['id']} (iteration {q['iteration']}, {q['agent']}"
            + (f", task {q['task']}" if q["task"] else "")
            + f'): {q["question"]} (`soda answer {q["id"]} "..."`)'
            for q in self.questions
        ]
        if self.rejected_inputs:
            lines.append(
                f"rejected inbox files: {len(self.rejected_inputs)} in state/inbox/rejected/"
            )
            lines += [f"  {r['reason']}" for r in self.rejected_inputs[:REJECTED_SHOWN]]
        if self.last_error:
            e = self.last_error
            where = f" in iteration {e['iteration']}" if e["iteration"] else ""
            lines.append(f"last error: {e['kind']}{where} at {e['at']}: {e['reason']}")
        if self.next_wake:
            lines.append(f"next wake: {self.next_wake}")
        if self.tracker:
            lines += _tracker_lines(self.tracker)
        if self.pull_request:
            lines += forge_report.lines(self.pull_request)
        if self.budgets:
            lines.append("budgets:")
            lines += [f"  {b['line']}" for b in self.budgets]
        return lines

    def dumps(self) -> str:
        return json.dumps(self.to_json(), default=str)


def _issue(item: tracker_rows.TrackerItem) -> dict[str, Any]:
    return {
        "number": item.number, "title": item.title, "state": item.state,
        "branch": item.branch, "pr": item.pr_number, "depends": list(item.depends),
        "last_word": item.last_word,
    }  # fmt: skip


def _tracker(config: Config, db: Database) -> dict[str, Any] | None:
    if not config.tracker.enabled:
        return None
    items = tracker_rows.items(db)
    running = [item for item in items if item.state == "running"]
    ended = [item for item in items if item.state in ("done", "stuck", "halted", "cancelled")]
    return {
        "in_progress": _issue(running[0]) if running else None,
        "waiting": [_issue(item) for item in waiting(db, config.tracker.priority)],
        "finished": [_issue(item) for item in ended[-FINISHED_SHOWN:]],
    }


def _tracker_lines(tracker: dict[str, Any]) -> list[str]:
    now = tracker["in_progress"]
    lines = [
        f"issue in progress: #{now['number']} {now['title']} ({now['branch']})"
        if now
        else "issue in progress: none"
    ]
    for item in tracker["waiting"]:
        after = ", ".join(f"#{n}" for n in item["depends"])
        lines.append(
            f"  waiting: #{item['number']} {item['title']}" + (f" (after {after})" if after else "")
        )
    return lines


def status(config: Config, db: Database) -> Status:
    pid = running_pid(config.state_dir)
    issues = _tracker(config, db)
    working = issues["in_progress"] if issues and issues["in_progress"] else None
    branch = working["branch"] if working else milestone_branch(config)
    current = runs.unfinished_iteration(db) if pid else None
    last = runs.last_decision(db)
    return Status(
        pid=pid,
        iteration=current[0] if current else None,
        phase=current[1] if current else None,
        agent=_current_agent(db, current[0]) if current else None,
        paused=paused(db),
        last_decision=last[0] if last else None,
        last_reason=last[1] if last else None,
        pending_inputs=human_inputs.pending_count(db),
        unread_inputs=unread_inputs(config.state_dir),
        pending_approval=_pending_approval(db, current[0]) if current else _suspended(db),
        rejected_inputs=rejected_inputs(config.state_dir),
        last_error=_last_error(db),
        budgets=_budgets(config, db),
        questions=_questions(db),
        next_wake=next_wake(config.state_dir) if pid else None,
        pull_request=forge_report.summary(db, branch),
        provider_wait=_provider_wait(db, current[0]) if current else None,
        tracker=issues,
    )


def _provider_wait(db: Database, iteration: int) -> str | None:
    """The running iteration's wait for the provider's limit, if it waits now."""
    row = event_rows.last_of_kinds(db, [quota.WAITING, quota.RESUMED])
    if row is None or row[3] != iteration or row[4] != quota.WAITING:
        return None
    return quota.waiting_line(str(json.loads(row[5]).get("until")))


def _current_agent(db: Database, iteration: int) -> str | None:
    row = event_rows.last_of_kinds(db, ["agent.start", "agent.turn", "agent.end"])
    if row is None or row[3] != iteration or row[4] == "agent.end":
        return None
    data = json.loads(row[5])
    return f"{data.get('agent')} turn {data['turn']}" if "turn" in data else data.get("agent")


def _pending_approval(db: Database, iteration: int) -> dict[str, Any] | None:
    row = event_rows.last_of_kinds(db, ["approval.waiting", "approval.verdict"])
    if row is None or row[4] != "approval.waiting":
        return None
    data = json.loads(row[5])
    if data.get("iteration") != iteration:
        return None
    subject = data.get("subject") or f"the plan is {data.get('risk', '?')} risk"
    return {"iteration": iteration, "subject": subject}


def _suspended(db: Database) -> dict[str, Any] | None:
    """The plan suspended for approval (`[approval] wait = "suspend"`), or the
    merges held for it, if one waits."""
    waiting = approvals.waiting(db)
    if waiting is None:
        return None
    until = f"until {moment(waiting.deadline)}"
    if waiting.kind == "merge":
        asked = "; ".join(
            f"{merge['reason']}: {', '.join(merge['items'])}"
            for merge in approvals.held_merges(waiting)
        )
        subject = f"the {waiting_what(waiting)} needs a person ({asked}), {until}"
        return {"iteration": waiting.iteration, "subject": subject}
    plan = IterationPlan.model_validate_json(waiting.plan_json)
    subject = f"the plan is {plan_risk(plan)} risk, {until}"
    return {"iteration": waiting.iteration, "subject": subject}


def _last_error(db: Database) -> dict[str, Any] | None:
    row = history.last_error(db)
    if row is None:
        return None
    at, kind, reason, iteration = row
    return {"at": at, "kind": kind, "reason": reason, "iteration": iteration}


def unread_inputs(state_dir: Path) -> int:
    """Entries waiting in the inbox (not soda's own folders, not dot files)."""
    try:
        names = os.listdir(inbox_dir(state_dir))
    except OSError:
        return 0
    own = (PROCESSED, REJECTED)
    return sum(1 for name in names if name not in own and not name.startswith("."))


def rejected_inputs(state_dir: Path) -> list[dict[str, str]]:
    """The files soda moved to inbox/rejected/, newest first, each with the reason
    kept beside it (`NAME.reason`). Notes are read, never followed if a link."""
    directory = inbox_dir(state_dir) / REJECTED
    found: list[tuple[float, dict[str, str]]] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return []
    for entry in entries:
        if not entry.name.endswith(REASON) or not entry.is_file(follow_symlinks=False):
            continue
        try:
            fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as fh:
                text = fh.read(REASON_BYTES).decode("utf-8", "replace").strip()
            mtime = entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        name = os.fsdecode(entry.name)[: -len(REASON)]
        found.append((mtime, {"file": name.encode("utf-8", "replace").decode(), "reason": text}))
    return [item for _, item in sorted(found, key=lambda pair: pair[0], reverse=True)]


def _questions(db: Database) -> list[dict[str, Any]]:
    return [
        {
            "id": q.id,
            "iteration": q.iteration,
            "agent": q.agent,
            "task": q.task_key,
            "question": q.question,
            "asked_at": q.asked_at,
        }
        for q in questions.open_questions(db)
    ]


def _budgets(config: Config, db: Database) -> list[dict[str, Any]]:
    """Each budget's use, limit and scope (soda.agent.budget), with its one-line form."""
    from soda.agent.budget import uses

    return [
        {
            "key": use.key,
            "scope": use.scope,
            "used": use.used,
            "limit": use.limit,
            "unit": use.unit,
            "spent": use.spent,
            "line": use.line(),
        }
        for use in uses(config, db)
    ]
