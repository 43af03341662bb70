"""ORIENT's input per iteration with a young and an old history: characters (and
tokens ~ characters / 4) of the requests the model receives, with 10 and with
10,000 past iterations in the database.

Each history is made through soda's own store functions and git: per past
iteration an iteration record (intent, outcome, ACT's result with a task and a
failing test every third time), two Trace tasks (one closed, some blocked) with
a comment, a learning, and a commit on the milestone branch touching a file of
its own. Then SENSE runs and ORIENT's agents (verifier, assessor, planner) are
asked once each through the Anthropic provider against the local Messages-API
server; every agent submits on its first turn, so the figure is what the
history adds to their inputs. Goal: old / young <= 1.05.

    python bench/orient_input.py [--young 10] [--old 10000]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from local_api import NOT_MET, VERIFIED, anthropic_project, plan, responder, submit
from mature_history import commit_history

from soda.config import load
from soda.loop.orient import orient
from soda.loop.phases import sense_phase
from soda.loop.session import Session
from soda.store import runs
from soda.store.db import now
from tests.fakeapi import FakeAPI

GOAL = 1.05
SCRIPT = {"verifier": [submit(VERIFIED)], "assessor": [submit(NOT_MET)], "planner": [plan]}


def seed(session: Session, past: int) -> None:
    """`past` iterations of history: records, tasks, comments, learnings, commits."""
    db, tracker = session.db, session.tracker
    root = session.milestone.root_task_id
    for n in range(1, past + 1):
        iteration_id = runs.start_iteration(db, session.run_id, n)
        task = tracker.create(f"Add step {n} of the calculator", f"step {n}", parent_id=root)
        follow = tracker.create(f"Follow-up {n}", "later", parent_id=root)
        tracker.comment(task.id, "executor", f"step {n}: tests pass locally", iteration_id)
        failed = n % 3 == 0
        if failed:
            tracker.block(follow.id, f"needs step {n} merged first")
        tracker.close(task.id, f"merged in iteration {n}")
        act = {
            "outcome": "gate_failed" if failed else "merged",
            "detail": "1 test newly failing" if failed else "no test newly failing",
            "baseline": "10 passed, 2 failed (exit 1)",
            "after": "11 passed, 1 failed (exit 1)",
            "tasks": [
                {
                    "key": "a",
                    "task_id": task.id,
                    "title": task.title,
                    "status": "completed",
                    "reason": "",
                    "commit": None,
                    "result": {"summary": f"implemented step {n}"},
                }
            ],
            "failing": {f"tests/test_calc.py::test_step_{n}": "AssertionError: 1 != 2"}
            if failed
            else {},
        }
        runs.save_iteration(
            db,
            iteration_id,
            {
                "intent": f"step {n}",
                "decision": "continue",
                "decision_reason": f"step {n} planned",
                "outcome": act["outcome"],
                "act_json": act,
                "ended_at": now(),
            },
        )
        session.store_learnings([f"fact {n} about the codebase"], "orient", iteration_id)
    commit_history(session.config.root, session.milestone.branch, past, lambda n: f"step {n}")


def measure(past: int, max_learnings: int | None) -> dict[str, int]:
    """Characters of each ORIENT agent's request after `past` iterations."""
    fake = FakeAPI()
    fake.respond = responder(SCRIPT)
    fake.start()
    try:
        with tempfile.TemporaryDirectory(prefix="soda-bench-") as tmp:
            path = anthropic_project(Path(tmp) / "project", fake)
            if max_learnings is not None:
                text = path.read_text().replace(
                    "max_learnings = 12", f"max_learnings = {max_learnings}"
                )
                path.write_text(text)
            session = Session.open(load(path))
            seed(session, past)
            it = session.begin_iteration()  # iteration past + 1
            claims = sense_phase(session, it, lambda line: None)
            orient(session, it, claims)
            sizes: dict[str, int] = {}
            for request in fake.requests:
                body = request.body
                prompt = [body.get("tools"), body.get("system"), body.get("messages")]
                agent = body["system"][0]["text"].split()[3]
                sizes[agent] = sizes.get(agent, 0) + len(json.dumps(prompt, ensure_ascii=False))
            return sizes
    finally:
        fake.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--young", type=int, default=10)
    parser.add_argument("--old", type=int, default=10_000)
    parser.add_argument(
        "--max-learnings", type=int, default=None, help="[context] max_learnings (default 12)"
    )
    args = parser.parse_args()
    young = measure(args.young, args.max_learnings)
    old = measure(args.old, args.max_learnings)
    print(f"{'agent':<10} {args.young:>8} past {args.old:>8} past   ratio")
    for agent in young:
        print(
            f"{agent:<10} {young[agent]:>13,} {old.get(agent, 0):>13,}   "
            f"{old.get(agent, 0) / young[agent]:.3f}"
        )
    a, b = sum(young.values()), sum(old.values())
    ratio = b / a
    print(
        f"{'ORIENT':<10} {a:>13,} {b:>13,}   {ratio:.3f}  "
        f"(~{a // 4:,} vs ~{b // 4:,} tokens; goal <= {GOAL}: "
        f"{'met' if ratio <= GOAL else 'missed'})"
    )


if __name__ == "__main__":
    sys.exit(main())
