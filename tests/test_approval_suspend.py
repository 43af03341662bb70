"""`[approval] wait = "suspend"`: a plan that needs a person's approval ends its
iteration (STUCK, outcome awaiting_approval) instead of holding it; the next
iteration, without planning again, runs the plan once a person approved it (or
as they edited it), or records the rejection: theirs, or the timeout's. The
loop runs for real with the demo's script; the person is the real CLI."""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

import pytest

from soda.cli.demo import SCRIPT_PATH, prepare
from soda.config import load
from soda.contracts import HumanInput
from soda.contracts.outcomes import RunStatus
from soda.daemon.process import Daemon
from soda.human.write import write_input
from soda.loop.run import Ending, IterationResult, run_loop
from soda.loop.session import Session
from soda.loop.wake import nothing_new
from soda.store import approvals
from soda.system.lock import release_lock
from tests.conftest import git, soda
from tests.plan_fakes import plan, task
from tests.test_approval import risky_script
from tests.test_loop import project


def suspending(tmp_path: Path, timeout: float = 3600.0) -> tuple[Path, Session]:
    root = project(tmp_path, risky_script())
    config = root / "soda.toml"
    text = config.read_text().replace('wait = "block"', 'wait = "suspend"')
    config.write_text(text.replace("timeout = 3600.0", f"timeout = {timeout}"))
    return root, Session.open(load(config))


def again(session: Session, lines: list[str] | None = None, once: bool = False) -> IterationResult:
    """The loop once more in the same session (the scripted model goes on), as
    the daemon starts a run at each wake."""
    if session.run_ended:
        session.start_run()
    return run_loop(session, (lines if lines is not None else []).append, once=once)


def rows(session: Session) -> list[tuple[int, str, str]]:
    return [
        (r["number"], r["decision"], r["outcome"])
        for r in session.db.query("SELECT number, decision, outcome FROM iterations ORDER BY id")
    ]


def executor_calls(session: Session) -> int:
    query = "SELECT count(*) FROM agent_calls WHERE agent = 'executor'"
    return int(session.db.execute(query).fetchone()[0])


def kinds(session: Session, prefix: str) -> list[str]:
    query = "SELECT kind FROM events WHERE kind LIKE ? ORDER BY id"
    return [row[0] for row in session.db.execute(query, [f"{prefix}%"])]


def test_a_suspended_plan_runs_once_approved_without_planning_again(tmp_path: Path) -> None:
    root, session = suspending(tmp_path)
    lines: list[str] = []
    first = again(session, lines)
    assert first.ending is Ending.STUCK
    assert first.reason.startswith("waiting for approval of iteration 1's plan until ")
    assert rows(session) == [(1, "STUCK", "awaiting_approval")]
    assert any("soda approve 1" in line and "the next one acts" in line for line in lines)
    assert executor_calls(session) == 0
    assert kinds(session, "plan.") == ["plan.started", "plan.waiting"]
    shown = json.loads(soda("status", "--json", cwd=root).stdout)["pending_approval"]
    assert shown["iteration"] == 1 and "high risk, until " in shown["subject"]
    assert soda("approve", "1", cwd=root).returncode == 0  # its iteration ended, its plan waits
    done = again(session)
    assert done.ending is Ending.DONE
    assert rows(session) == [
        (1, "STUCK", "awaiting_approval"),
        (2, "CONTINUE", "merged"),
        (3, "DONE", "done"),
    ]
    assert "def divide" in git(root, "show", "soda/spec:calc.py")
    assert executor_calls(session) == 5
    planners = session.db.execute("SELECT count(*) FROM agent_calls WHERE agent = 'planner'")
    assert planners.fetchone()[0] == 1  # iteration 2 did not plan again
    (kept,) = session.db.query("SELECT iteration, status, reason FROM approvals")
    assert kept == {
        "iteration": 1,
        "status": "approved",
        "reason": "approved by a person: approved",
    }
    assert session.db.execute("SELECT status, applied_iteration FROM human_inputs").fetchall() == [
        ("applied", 1)
    ]
    late = soda("approve", "1", cwd=root)
    assert late.returncode == 2 and "it ended" in late.stderr


def test_a_suspended_plan_is_rejected_at_its_deadline_and_a_wake_before_keeps_it(
    tmp_path: Path,
) -> None:
    root, session = suspending(tmp_path, timeout=2)
    assert again(session).ending is Ending.STUCK
    (first,) = session.db.query("SELECT id, deadline FROM approvals")
    assert nothing_new(session) is not None  # the daemon's next wake is free...
    # ...but a person's input wakes it: the plan still waits, with its deadline
    write_input(root / "state", HumanInput(kind="correction", text="keep it small"))
    assert again(session).ending is Ending.STUCK
    assert rows(session)[-1] == (2, "STUCK", "awaiting_approval")
    assert list(session.db.query("SELECT id, deadline FROM approvals")) == [first]
    time.sleep(max(0.0, first["deadline"] - time.time()) + 0.1)
    assert nothing_new(session) is None  # past the deadline: the next wake rejects it
    assert again(session, once=True).ending is Ending.CONTINUE
    assert rows(session)[2] == (3, "CONTINUE", "rejected")
    act = json.loads(
        session.db.execute("SELECT act_json FROM iterations WHERE number = 3").fetchone()[0]
    )
    assert act["detail"] == "no approval within 2s"
    assert executor_calls(session) == 0
    verdict = session.db.execute(
        "SELECT data_json FROM events WHERE kind = 'approval.verdict'"
    ).fetchone()[0]
    assert json.loads(verdict) == {
        "iteration": 1,
        "approved": False,
        "reason": "no approval within 2s",
    }
    assert approvals.waiting(session.db) is None
    # the correction waits for the next ORIENT: no iteration that resumed the plan read it
    status = session.db.execute("SELECT status FROM human_inputs").fetchall()
    assert status == [("pending",)]


def test_a_suspended_plan_runs_as_the_person_edited_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, session = suspending(tmp_path)
    assert again(session).ending is Ending.STUCK
    script = tmp_path / "edit.py"
    script.write_text(
        "import json, sys\n"
        "plan = json.load(open(sys.argv[1]))\n"
        "plan['tasks'][0]['depends_on'] = ['a']\n"
        "open(sys.argv[1], 'w').write(json.dumps(plan))\n"
    )
    monkeypatch.setenv("EDITOR", f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}")
    monkeypatch.delenv("VISUAL", raising=False)
    refused = soda("approve", "1", "--edit", cwd=root)
    assert refused.returncode == 2 and "edited plan refused" in refused.stderr
    script.write_text(
        "import json, sys\n"
        "plan = json.load(open(sys.argv[1]))\n"
        "plan['tasks'][0]['title'] = 'Add divide, edited'\n"
        "open(sys.argv[1], 'w').write(json.dumps(plan))\n"
    )
    assert soda("approve", "1", "--edit", cwd=root).returncode == 0
    assert again(session).ending is Ending.DONE
    edited = session.db.execute("SELECT data_json FROM events WHERE kind = 'approval.edited'")
    assert json.loads(edited.fetchone()[0])["iteration"] == 1
    act = json.loads(
        session.db.execute("SELECT act_json FROM iterations WHERE number = 2").fetchone()[0]
    )
    assert act["outcome"] == "merged"
    assert approvals.waiting(session.db) is None


def test_an_idle_daemon_wakes_for_a_suspended_plan_past_its_deadline(tmp_path: Path) -> None:
    config_path = prepare(tmp_path / "project")
    (config_path.parent / SCRIPT_PATH).write_text(json.dumps({"responses": []}))
    daemon = Daemon(config_path)
    run = daemon._preflight()
    session = run._session  # the loop's own: the test reads its record
    try:
        kept = approvals.wait(
            session.db,
            iteration_id=None,
            iteration=7,
            plan_json=json.dumps(plan(task("a", risk="high"))),
            timeout=60,
            deadline=time.time() + 60,
        )
        daemon.idle = True  # as after the STUCK that suspended it
        daemon._tick(run)
        assert rows(session) == []  # before the deadline, only a person wakes it
        approvals.expire(session.db, kept.id)
        daemon._tick(run)
        assert rows(session)[0] == (1, "CONTINUE", "rejected")
        assert approvals.waiting(session.db) is None
        assert executor_calls(session) == 0
    finally:
        session.finish_run(RunStatus.STOPPED, "test over")
        release_lock(daemon.config.state_dir)
        session.db.conn.close()
