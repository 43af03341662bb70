"""A mature project history for the prompt benches: `past` iterations as soda
would have recorded them, written through soda's own store functions and git.

Per past iteration: the iteration record (intent, decision, outcome, ACT's
result with its task, the gate's failing test every fifth time), the task it
worked on (created, commented by the executor, closed: merged, or blocked when
the gate failed), a commit on the milestone branch touching a file of its own.
Every third iteration opens a follow-up task and every fourth records a
learning; the backlog is worked oldest first, so about a dozen follow-ups stay
open, a few blocked ones wait for a person, and the learnings sit at their cap
(`[context] max_learnings`), the oldest retired as new ones come. Every cap of
the claims is full: what an agent reads after 10,000 iterations.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from soda.loop.session import Session
from soda.store import runs
from soda.store.db import now

OPEN_BACKLOG = 12
"""Follow-up tasks left open: past it the oldest is worked (closed)."""
BLOCKED = 4
"""Blocked tasks left waiting: past it the oldest is unblocked."""
TOPICS = (
    "parser",
    "formatter",
    "command line",
    "history file",
    "unit table",
    "rounding",
    "error messages",
    "plugin loader",
)


def topic(n: int) -> str:
    return f"{TOPICS[n % len(TOPICS)]} {n}"


def learning(n: int) -> str:
    """A durable fact of the kind the verifier records (about 120 characters)."""
    return (
        f"The {topic(n)} code lives in src/step_{n}.py and registers itself in "
        f"calc.OPERATIONS; its tests are tests/test_step_{n}.py."
    )


def seed(session: Session, past: int) -> None:
    """`past` iterations of history, numbered 1..past, in the session's run."""
    db, tracker = session.db, session.tracker
    root = session.milestone.root_task_id
    backlog: list[int] = []
    blocked: list[int] = []
    for n in range(1, past + 1):
        iteration_id = runs.start_iteration(db, session.run_id, n)
        failed = n % 5 == 0
        if n % 3 == 0:
            follow = tracker.create(
                f"Handle the {topic(n)} edge cases",
                f"Empty input, very large numbers and unicode digits in the {topic(n)} code.",
                parent_id=root,
                author="orient",
                iteration_id=iteration_id,
            )
            backlog.append(follow.id)
        if len(backlog) > OPEN_BACKLOG:  # worked this iteration, oldest first
            task = tracker.show(backlog.pop(0))
        else:
            task = tracker.create(
                f"Add the {topic(n)} step",
                f"Implement the {topic(n)} step with a test of its own.",
                parent_id=root,
                author="orient",
                iteration_id=iteration_id,
            )
        tracker.comment(
            task.id,
            "executor",
            f"Added src/step_{n}.py and tests/test_step_{n}.py; the suite passes locally.",
            iteration_id,
        )
        if failed:
            tracker.block(task.id, f"tests/test_step_{n}.py::test_edge fails; needs a decision")
            blocked.append(task.id)
            if len(blocked) > BLOCKED:  # a person decided: worked next
                backlog.insert(0, tracker.unblock(blocked.pop(0)).id)
        else:
            tracker.close(task.id, f"merged in iteration {n}")
        runs.save_iteration(db, iteration_id, _record(n, task.id, task.title, failed))
        if n % 4 == 0:
            session.store_learnings([learning(n)], "verifier", iteration_id)
    commit_history(session.config.root, session.milestone.branch, past)


def _record(n: int, task_id: int, title: str, failed: bool) -> dict[str, object]:
    test = f"tests/test_step_{n}.py::test_edge"
    act = {
        "outcome": "gate_failed" if failed else "merged",
        "detail": "1 test newly failing" if failed else "no test newly failing",
        "baseline": f"{n + 40} passed (exit 0)",
        "after": f"{n + 40} passed, 1 failed (exit 1)" if failed else f"{n + 41} passed (exit 0)",
        "tasks": [
            {
                "key": "a",
                "task_id": task_id,
                "title": title,
                "status": "completed",
                "reason": "",
                "commit": None,
                "result": {"summary": f"Implemented the {topic(n)} step with its test."},
            }
        ],
        "failing": {test: "AssertionError: assert 3 == 2"} if failed else {},
    }
    return {
        "intent": f"Implement the {topic(n)} step",
        "decision": "continue",
        "decision_reason": f"one task planned: {title}",
        "outcome": act["outcome"],
        "act_json": act,
        "ended_at": now(),
    }


def commit_history(
    repo: Path, branch: str, count: int, subject: Callable[[int], str] | None = None
) -> None:
    """`count` commits on `branch`, one new file each, with git fast-import; the
    n-th one's subject is `subject(n)` (by default the iteration's intent)."""
    head = git(repo, "rev-parse", branch)
    lines = []
    for n in range(1, count + 1):
        message = subject(n) if subject else f"Implement the {topic(n)} step"
        content = f"value = {n}\n"
        lines += [f"commit refs/heads/{branch}", f"mark :{n}"]
        lines += [f"committer soda <soda@example.invalid> {1_700_000_000 + n} +0000"]
        lines += [f"data {len(message)}", message]
        lines += [f"from {head}" if n == 1 else f"from :{n - 1}"]
        lines += [f"M 644 inline src/step_{n}.py", f"data {len(content)}", content]
    data = ("\n".join(lines) + "\n").encode()
    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, input=data, check=True)


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout.strip()
