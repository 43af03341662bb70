"""`[approval] wait = "suspend"` for a merge the gate may not make alone: the
task's work is kept under refs/soda/approvals/N-KEY, its iteration ends STUCK
(outcome awaiting_approval), and the next iteration, without planning or
running the executor again, merges the kept work once a person approved it
(the gate run again on the exact commit), or records the rejection: theirs, or
the deadline's. The loop runs for real with the demo's script (its executor
also writes a tests/conftest.py, which the gate never merges on its own word);
the person is the real CLI."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

from soda.loop.run import Ending
from soda.loop.session import Session
from soda.loop.wake import nothing_new
from soda.store import approvals
from tests.conftest import git, soda
from tests.test_approval_suspend import again, executor_calls, kinds, rows
from tests.test_loop import DEMO_SCRIPT, project

CONFTEST = "# the project's shared test setup\n"
REF = "refs/soda/approvals/1-a"


def conftest_script() -> list[dict[str, Any]]:
    """The demo, its executor also adding tests/conftest.py (test infrastructure)."""
    script = copy.deepcopy(DEMO_SCRIPT)
    script[7]["tool_calls"].append(
        {"name": "write_file", "input": {"path": "tests/conftest.py", "content": CONFTEST}}
    )
    return script


def holding(tmp_path: Path, timeout: float = 3600.0) -> tuple[Path, Session]:
    """A project whose iteration 1 holds its merge for a person."""
    from soda.config import load

    root = project(tmp_path, conftest_script())
    config = root / "soda.toml"
    text = config.read_text().replace('wait = "block"', 'wait = "suspend"')
    config.write_text(text.replace("timeout = 3600.0", f"timeout = {timeout}"))
    session = Session.open(load(config))
    lines: list[str] = []
    first = again(session, lines)
    assert first.ending is Ending.STUCK, lines
    assert first.reason.startswith("waiting for approval of iteration 1's merge of task 2 until ")
    return root, session


def ref(root: Path, name: str = REF) -> str | None:
    found = git(root, "for-each-ref", "--format=%(objectname)", name)
    return found or None


def act_of(session: Session, number: int) -> dict[str, Any]:
    query = "SELECT act_json FROM iterations WHERE number = ?"
    return json.loads(session.db.execute(query, [number]).fetchone()[0])


def gates(session: Session) -> list[dict[str, Any]]:
    query = "SELECT data_json FROM events WHERE kind = 'act.gate' ORDER BY id"
    return [json.loads(row[0]) for row in session.db.execute(query)]


def comments(session: Session, task_id: int) -> list[str]:
    return [c.body for c in session.tracker.comments(task_id)]


def test_a_held_merge_lands_on_the_next_iteration_once_approved(tmp_path: Path) -> None:
    root, session = holding(tmp_path)
    start = git(root, "rev-parse", "soda/spec")
    assert rows(session) == [(1, "STUCK", "awaiting_approval")]
    assert kinds(session, "plan.") == ["plan.started", "plan.waiting"]
    (held,) = session.db.query("SELECT iteration, kind, status, merge_json FROM approvals")
    assert (held["iteration"], held["kind"], held["status"]) == (1, "merge", "waiting")
    (kept,) = json.loads(held["merge_json"])
    assert kept["items"] == ["changes test infrastructure: tests/conftest.py"]
    assert kept["task"]["task_id"] == 2 and kept["ref"] == REF
    assert ref(root) == kept["commit"]  # the work is kept, out of the milestone
    assert git(root, "show", f"{REF}:tests/conftest.py") + "\n" == CONFTEST
    assert git(root, "rev-parse", "soda/spec") == start
    assert any("waiting for approval of its merge" in text for text in comments(session, 2))
    shown = json.loads(soda("status", "--json", cwd=root).stdout)["pending_approval"]
    assert shown["iteration"] == 1 and "merge of task 2" in shown["subject"], shown
    assert "tests/conftest.py" in shown["subject"]
    edit = soda("approve", "1", "--edit", cwd=root)
    assert edit.returncode == 2 and "merge" in edit.stderr, edit.stderr
    assert soda("approve", "1", cwd=root).returncode == 0
    done = again(session)
    assert done.ending is Ending.DONE
    assert rows(session) == [
        (1, "STUCK", "awaiting_approval"),
        (2, "CONTINUE", "merged"),
        (3, "DONE", "done"),
    ]
    assert executor_calls(session) == 5  # the kept work merged: no executor ran again
    planners = session.db.execute("SELECT count(*) FROM agent_calls WHERE agent = 'planner'")
    assert planners.fetchone()[0] == 1
    # the gate ran again on iteration 2's own merge commit, and the approval counted
    first, second = gates(session)
    assert first["plan"] == 1 and not first["ok"]
    assert second["plan"] == 2 and second["approval"] == first["approval"]
    merged = git(root, "rev-parse", "soda/spec")
    assert "Soda-Iteration: 2" in git(root, "log", "-1", "--format=%B", merged)
    assert git(root, "show", "soda/spec:tests/conftest.py") + "\n" == CONFTEST
    assert "def divide" in git(root, "show", "soda/spec:calc.py")
    assert act_of(session, 2)["detail"].endswith("approved by a person: approved (iteration 1)")
    assert ref(root) is None
    assert session.tracker.show(2).status == "closed"
    (settled,) = session.db.query("SELECT status, reason FROM approvals")
    assert settled == {"status": "approved", "reason": "approved by a person: approved"}
    answer = session.db.execute("SELECT response FROM human_inputs").fetchone()[0]
    assert answer == "merge approved"


def test_a_held_merge_rejected_by_the_person_is_not_merged(tmp_path: Path) -> None:
    root, session = holding(tmp_path)
    start = git(root, "rev-parse", "soda/spec")
    assert soda("reject", "1", "--reason", "no conftest here", cwd=root).returncode == 0
    assert again(session, once=True).ending is Ending.CONTINUE
    assert rows(session)[1] == (2, "CONTINUE", "rejected")
    act = act_of(session, 2)
    assert act["detail"] == "rejected by a person: no conftest here"
    assert [(t["task_id"], t["status"], t["failure"]) for t in act["tasks"]] == [
        (2, "failed", "rejected")
    ]
    assert git(root, "rev-parse", "soda/spec") == start
    assert ref(root) is None
    assert executor_calls(session) == 5
    assert session.tracker.show(2).status == "open"  # reopened: the next ORIENT plans it
    assert "work not merged: rejected: rejected by a person: no conftest here" in comments(
        session, 2
    )
    assert approvals.waiting(session.db) is None


def test_a_held_merge_is_rejected_at_its_deadline(tmp_path: Path) -> None:
    root, session = holding(tmp_path, timeout=2)
    start = git(root, "rev-parse", "soda/spec")
    (row,) = session.db.query("SELECT deadline FROM approvals")
    assert nothing_new(session) is not None
    time.sleep(max(0.0, row["deadline"] - time.time()) + 0.1)
    assert nothing_new(session) is None  # past the deadline: the next wake rejects it
    assert again(session, once=True).ending is Ending.CONTINUE
    assert rows(session)[1] == (2, "CONTINUE", "rejected")
    assert act_of(session, 2)["detail"] == "no approval within 2s"
    assert git(root, "rev-parse", "soda/spec") == start
    assert ref(root) is None
    assert session.tracker.show(2).status == "open"


def test_an_approval_counts_only_for_what_the_person_saw(tmp_path: Path) -> None:
    """The re-run gate asks about an item the person was not shown: the merge is
    held again, as iteration 2's, its work kept anew."""
    root, session = holding(tmp_path)
    (row,) = session.db.query("SELECT id, merge_json FROM approvals")
    kept = json.loads(row["merge_json"])
    kept[0]["items"] = ["changes test infrastructure: tests/other.py"]
    session.db.execute(
        "UPDATE approvals SET merge_json = ? WHERE id = ?", [json.dumps(kept), row["id"]]
    )
    session.db.conn.commit()
    assert soda("approve", "1", cwd=root).returncode == 0
    second = again(session)
    assert second.ending is Ending.STUCK
    assert second.reason.startswith("waiting for approval of iteration 2's merge of task 2 until")
    assert rows(session)[1] == (2, "STUCK", "awaiting_approval")
    assert ref(root) is None and ref(root, "refs/soda/approvals/2-a") is not None
    assert executor_calls(session) == 5
    states = session.db.execute("SELECT iteration, status FROM approvals ORDER BY id").fetchall()
    assert states == [(1, "approved"), (2, "waiting")]
    assert soda("approve", "2", cwd=root).returncode == 0
    assert again(session).ending is Ending.DONE
    assert git(root, "show", "soda/spec:tests/conftest.py") + "\n" == CONFTEST
    assert ref(root, "refs/soda/approvals/2-a") is None


def two_held_script() -> list[dict[str, Any]]:
    """Two independent tasks, each adding a conftest.py: both merges are held."""
    script = conftest_script()
    planner = copy.deepcopy(script[4])
    tasks = planner["tool_calls"][0]["input"]["iteration_plan"]["tasks"]
    tasks.append(
        {
            "id": "b",
            "task_id": None,
            "title": "Write NOTES.md",
            "description": "Say in NOTES.md what calc offers.",
            "depends_on": [],
            "risk": "low",
            "tool_hints": [],
        }
    )
    notes = [
        {
            "agent": "executor",
            "tool_calls": [
                {"name": "write_file", "input": {"path": "NOTES.md", "content": "calc\n"}},
                {"name": "write_file", "input": {"path": "conftest.py", "content": CONFTEST}},
            ],
        },
        {
            "agent": "executor",
            "tool_calls": [
                {
                    "name": "submit",
                    "input": {
                        "tasks_blocked": [],
                        "task_comments": [],
                        "new_subtasks": [],
                        "learnings": [],
                        "summary": "NOTES.md says what calc offers.",
                    },
                }
            ],
        },
    ]
    return [*script[:4], planner, *script[5:10], *notes, *script[10:]]


def test_two_held_merges_wait_together_and_land_together(tmp_path: Path) -> None:
    from soda.config import load

    root = project(tmp_path, two_held_script())
    config = root / "soda.toml"
    text = config.read_text().replace('wait = "block"', 'wait = "suspend"')
    config.write_text(text.replace("max_parallel_tasks = 3", "max_parallel_tasks = 1"))
    session = Session.open(load(config))
    first = again(session)
    assert first.ending is Ending.STUCK
    assert first.reason.startswith("waiting for approval of iteration 1's merge of tasks 2, 3 ")
    (held,) = session.db.query("SELECT merge_json FROM approvals")
    kept = json.loads(held["merge_json"])
    assert [(k["task"]["id"], k["items"]) for k in kept] == [
        ("a", ["changes test infrastructure: tests/conftest.py"]),
        ("b", ["changes test infrastructure: conftest.py"]),
    ]
    assert ref(root) and ref(root, "refs/soda/approvals/1-b")
    assert soda("approve", "1", cwd=root).returncode == 0
    assert again(session).ending is Ending.DONE
    assert rows(session)[1] == (2, "CONTINUE", "merged")
    assert act_of(session, 2)["detail"] == "merged 2 of 2 tasks"
    assert executor_calls(session) == 7
    for path in ("tests/conftest.py", "conftest.py", "NOTES.md", "calc.py"):
        assert git(root, "show", f"soda/spec:{path}")
    assert ref(root) is None and ref(root, "refs/soda/approvals/1-b") is None
    assert {session.tracker.show(n).status for n in (2, 3)} == {"closed"}
