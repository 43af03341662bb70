"""Approval gates on risky plans: approve, reject and time out, through the real queue."""

from __future__ import annotations

import copy
import threading
import time
from pathlib import Path

import pytest

from soda.config import ApprovalConfig, Config
from soda.contracts import HumanInput, IterationPlan
from soda.events import Events
from soda.human import HumanQueue
from soda.human.approval import Verdict, await_approval, needs_approval, plan_risk
from soda.human.write import write_input
from soda.loop.run import Ending
from soda.store.db import open_db
from tests.test_loop import DEMO_SCRIPT, project, run


def risky_script() -> list[dict]:
    script = copy.deepcopy(DEMO_SCRIPT)
    plan = script[4]["tool_calls"][0]["input"]["iteration_plan"]
    plan["tasks"][0]["risk"] = "high"
    return script


def answer_later(root: Path, item: HumanInput, delay: float = 0.5) -> threading.Thread:
    def write() -> None:
        time.sleep(delay)
        write_input(root / "state", item)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def test_risk_levels() -> None:
    plan = IterationPlan.model_validate(
        risky_script()[4]["tool_calls"][0]["input"]["iteration_plan"]
    )
    assert plan_risk(plan) == "high"
    assert needs_approval(plan, "high") and needs_approval(plan, "medium")
    assert not needs_approval(plan, "critical")


def test_approved_plan_runs(tmp_path: Path) -> None:
    root = project(tmp_path, risky_script())
    answer_later(root, HumanInput(kind="approve", target=1))
    result, lines, session = run(root)
    assert result.ending is Ending.DONE
    assert any("soda approve 1" in line for line in lines)
    row = session.db.execute("SELECT status, applied_iteration FROM human_inputs").fetchone()
    assert row == ("applied", 1)


def test_rejected_plan_is_not_executed(tmp_path: Path) -> None:
    root = project(tmp_path, risky_script()[:5])
    answer_later(root, HumanInput(kind="reject", target=1, text="too risky"))
    result, _, session = run(root, once=True)
    assert result.ending is Ending.CONTINUE
    outcome = session.db.execute("SELECT outcome FROM iterations").fetchone()[0]
    assert outcome == "rejected"
    assert (
        session.db.execute("SELECT count(*) FROM agent_calls WHERE agent = 'executor'").fetchone()[
            0
        ]
        == 0
    )


@pytest.mark.parametrize("timeout", [1])
def test_unanswered_plan_times_out(tmp_path: Path, timeout: int) -> None:
    root = project(tmp_path, risky_script()[:5])
    config = root / "soda.toml"
    config.write_text(config.read_text().replace("timeout = 3600.0", f"timeout = {timeout}.0"))
    started = time.monotonic()
    result, _, session = run(root, once=True)
    assert result.ending is Ending.CONTINUE
    assert time.monotonic() - started < 30
    act = session.db.execute("SELECT act_json FROM iterations").fetchone()[0]
    assert "no approval within 1s" in act


# --- await_approval on explicit inputs ----------------------------------------


def wait(tmp_path: Path, timeout: float = 30.0, stop: bool = False) -> tuple[Verdict, list[str]]:
    state = tmp_path / "state"
    db = open_db(state / "soda.db")
    events = Events(db)
    lines: list[str] = []
    verdict = await_approval(
        HumanQueue(state, db, events),
        Config(approval=ApprovalConfig(timeout=timeout)),
        events,
        5,
        "the merge needs a person: conftest.py changed",
        lines.append,
        lambda: stop,
        poll_seconds=0.01,
    )
    return verdict, lines


def test_await_approval_takes_the_answer_from_the_queue(tmp_path: Path) -> None:
    write_input(tmp_path / "state", HumanInput(kind="approve", target=4))
    write_input(tmp_path / "state", HumanInput(kind="approve", target=5, text="fine"))

    verdict, lines = wait(tmp_path)

    assert verdict == Verdict(True, "approved by a person: fine")
    assert lines == [
        "approval: the merge needs a person: conftest.py changed; waiting for "
        "`soda approve 5` or `soda reject 5` (up to 30s)"
    ]
    db = open_db(tmp_path / "state" / "soda.db")
    assert db.execute(
        "SELECT target, response FROM (SELECT json_extract(payload_json, '$.target') AS target,"
        " response FROM human_inputs) ORDER BY target"
    ).fetchall() == [(4, None), (5, "merge approved")]


def test_await_approval_gives_up_when_asked_to_stop_or_at_the_timeout(tmp_path: Path) -> None:
    assert wait(tmp_path / "a", stop=True)[0] == Verdict(
        False, "soda was asked to stop while waiting"
    )
    assert wait(tmp_path / "b", timeout=0.05)[0] == Verdict(False, "no approval within 0s")


class StepClock:
    """A clock whose sleep moves time on at once: a wait on it takes no real time."""

    def __init__(self) -> None:
        self.now_s = 0.0
        self.slept: list[float] = []

    def now(self) -> str:
        return f"t+{self.now_s}"

    def monotonic(self) -> float:
        return self.now_s

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now_s += seconds


def test_the_approval_wait_runs_on_the_clock_it_is_given(tmp_path: Path) -> None:
    """An hour's timeout passes on the clock handed in, not on the wall clock."""
    state = tmp_path / "state"
    db = open_db(state / "soda.db")
    events = Events(db)
    clock = StepClock()
    started = time.monotonic()
    verdict = await_approval(
        HumanQueue(state, db, events),
        Config(approval=ApprovalConfig(timeout=3600)),
        events,
        5,
        "the merge needs a person",
        lambda line: None,
        lambda: False,
        poll_seconds=60,
        clock=clock,
    )
    assert verdict == Verdict(False, "no approval within 3600s")
    assert len(clock.slept) == 60 and set(clock.slept) == {60}
    assert time.monotonic() - started < 30  # no real hour (nor real minute) went by
