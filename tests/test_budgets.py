"""Budgets with a clear scope: per run (one `soda run` or daemon wake), per day
(with `soda budget reset`), per iteration; each exhaustion names the budget and
how to raise or reset it, and status can show every budget's use and limit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from soda.agent.budget import budget_lines, check, reset_day, spent_budget, uses
from soda.agent.recorder import CallRecorder
from soda.cli.demo import prepare
from soda.config import BudgetConfig, Config, ModelConfig, Price, load
from soda.errors import BudgetExhausted
from soda.events import Events
from soda.llm.base import ModelResponse, Usage
from soda.llm.function import FunctionModel, submit
from soda.loop.run import Ending, run_loop
from soda.loop.session import Session
from soda.store import open_db
from tests.conftest import insert_run, soda

DOLLAR = Price(input=1000.0, output=0.0)
"""$1000 per million input tokens: 1000 input tokens cost $1."""


def config(**budget: Any) -> Config:
    return Config(model=ModelConfig(prices={"m": DOLLAR}), budget=BudgetConfig(**budget))


def response(dollars: float) -> ModelResponse:
    usage = Usage(input_tokens=int(dollars * 1000))
    return ModelResponse(text="", tool_calls=[], stop_reason="end_turn", usage=usage, model="m")


def recorder_for(tmp_path: Path, cfg: Config) -> CallRecorder:
    db = open_db(tmp_path / "soda.db")
    recorder = CallRecorder(db, cfg, "function", Events(db))
    recorder.run_id = insert_run(db)
    return recorder


def test_the_run_budget_names_itself_and_a_new_run_counts_from_zero(tmp_path: Path) -> None:
    cfg = config(max_cost_usd=1.5, max_cost_usd_per_day=100)
    recorder = recorder_for(tmp_path, cfg)
    recorder("planner", response(1.0), 1)
    with pytest.raises(BudgetExhausted) as raised:
        recorder("planner", response(1.0), 2)
    message = str(raised.value)
    assert "max_cost_usd $1.5000" in message and "[budget] max_cost_usd" in message
    assert "next run or wake counts from 0" in message
    assert "max_cost_usd_per_day" not in message
    assert spent_budget(cfg, recorder.db).key == "budget.max_cost_usd"

    recorder.run_id = insert_run(recorder.db)  # the next run (or daemon wake)
    recorder.reset()
    recorder("planner", response(1.0), 1)  # no error: this run spent $1 of $1.50
    assert spent_budget(cfg, recorder.db) is None


def test_the_day_budget_counts_today_and_reset_counts_from_now(tmp_path: Path) -> None:
    cfg = config(max_cost_usd=100, max_cost_usd_per_day=2.5)
    recorder = recorder_for(tmp_path, cfg)
    recorder("planner", response(2.0), 1)
    with recorder.db.conn:  # yesterday's spend does not count today
        recorder.db.execute("UPDATE agent_calls SET started_at = '2000-01-01T00:00:00.000+00:00'")
    recorder("planner", response(2.0), 2)
    with pytest.raises(BudgetExhausted) as raised:
        recorder("planner", response(1.0), 3)
    message = str(raised.value)
    assert "spent $3.0000 today of max_cost_usd_per_day $2.5000" in message
    assert "soda budget reset" in message and "[budget] max_cost_usd_per_day" in message
    day = next(u for u in uses(cfg, recorder.db) if u.key == "budget.max_cost_usd_per_day")
    assert (day.used, day.limit, day.spent) == (3.0, 2.5, True)
    assert "budget.max_cost_usd_per_day: $3.0000 of $2.5000 (today) - SPENT" in budget_lines(
        cfg, recorder.db
    )

    reset_day(recorder.db)
    check(cfg, recorder.db, run_cost=0.0, iteration_tokens=0)  # spent again from zero
    assert spent_budget(cfg, recorder.db) is None
    recorder("planner", response(2.0), 4)
    with pytest.raises(BudgetExhausted, match="max_cost_usd_per_day"):
        recorder("planner", response(1.0), 5)


def test_budget_lines_show_every_budget_with_its_scope(tmp_path: Path) -> None:
    cfg = config(max_cost_usd=10, max_cost_usd_per_day=50, max_tokens_per_iteration=5000)
    recorder = recorder_for(tmp_path, cfg)
    recorder("planner", response(0.5), 1)
    lines = budget_lines(cfg, recorder.db)
    run_id = recorder.run_id
    assert lines == [
        f"budget.max_cost_usd: $0.5000 of $10.0000 (run {run_id}, running)",
        "budget.max_cost_usd_per_day: $0.5000 of $50.0000 (today)",
        f"budget.max_tokens_per_run: off (500 tokens in run {run_id}, running)",
        f"loop.max_iterations: 0 of 20 (run {run_id}, running)",
    ]
    with pytest.raises(BudgetExhausted, match="raise \\[budget\\] max_tokens_per_iteration"):
        recorder("planner", response(6.0), 2)  # 6000 tokens in one iteration


def test_a_spent_day_budget_stops_before_any_model_call(tmp_path: Path) -> None:
    root = tmp_path / "project"
    prepare(root)
    text = (root / "soda.toml").read_text()
    assert "max_cost_usd_per_day = 50.0" in text  # soda init wrote the key, documented
    (root / "soda.toml").write_text(text.replace("per_day = 50.0", "per_day = 0.5"))
    model = FunctionModel(lambda request: submit({}))
    session = Session.open(load(root / "soda.toml"), model=model)
    session.config.model.prices["m"] = DOLLAR
    with pytest.raises(BudgetExhausted):  # an earlier call today: $1 of $0.50
        session.recorder("planner", response(1.0), 1)
    lines: list[str] = []
    result = run_loop(session, lines.append)
    assert result.ending is Ending.STUCK
    assert "max_cost_usd_per_day" in result.reason and "soda budget reset" in result.reason
    assert model.calls == 0
    row = session.db.execute("SELECT outcome, decision FROM iterations").fetchone()
    assert row == ("budget", "STUCK")
    assert session.db.execute("SELECT status FROM runs").fetchone()[0] == "stuck"


def test_soda_budget_shows_and_resets(tmp_path: Path) -> None:
    root = tmp_path / "project"
    prepare(root)
    shown = soda("budget", cwd=root)
    assert shown.returncode == 0, shown.stderr
    assert "budget.max_cost_usd_per_day: $0.0000 of $50.0000 (today)" in shown.stdout
    reset = soda("budget", "reset", cwd=root)
    assert reset.returncode == 0, reset.stderr
    assert "today's spend counts from now" in reset.stdout
    db = open_db(root / "state" / "soda.db")
    assert db.execute("SELECT budget FROM budget_resets").fetchall() == [("day",)]
    wrong = soda("budget", "raise", cwd=root)
    assert wrong.returncode == 2
    assert wrong.stderr.strip() == "soda: soda budget: unknown action 'raise'; use show or reset"
