"""`soda cost`: calls, tokens and USD per iteration, agent and model, and in total,
from the calls soda's own recorder stored (priced by [model.prices])."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from soda.agent.recorder import CallRecorder
from soda.config import find_config, load
from soda.events import Events
from soda.llm.base import ModelResponse, Usage
from soda.store import open_db, runs
from tests.conftest import insert_run, soda

SONNET, HAIKU = "claude-sonnet-4-6", "claude-haiku-4-5"  # priced by genai-prices


def response(model: str, tokens_in: int, tokens_out: int, cache_read: int = 0) -> ModelResponse:
    usage = Usage(input_tokens=tokens_in, output_tokens=tokens_out, cache_read_tokens=cache_read)
    return ModelResponse(
        text="", tool_calls=[], stop_reason="tool_use", usage=usage, model=model, raw={}
    )


@pytest.fixture
def project(repo: Path) -> Path:
    """Two iterations' calls and one outside any iteration, stored by CallRecorder."""
    assert soda("init", cwd=repo).returncode == 0
    config = load(find_config(repo))
    db = open_db(config.db_path)
    recorder = CallRecorder(db, config, "anthropic", Events(db))
    recorder("doctor", response(HAIKU, 10, 1), 1)  # e.g. `soda doctor --ping`
    recorder.run_id = insert_run(db)
    for number, calls in (
        (1, [("assessor", SONNET, 100_000, 10_000, 0), ("executor", HAIKU, 200_000, 20_000, 0)]),
        (2, [("executor", HAIKU, 50_000, 5_000, 400_000), ("executor", HAIKU, 1_000, 100, 0)]),
    ):
        recorder.iteration_id = runs.start_iteration(db, recorder.run_id, number)
        for turn, (agent, model, tin, tout, cache) in enumerate(calls, 1):
            recorder(agent, response(model, tin, tout, cache), turn)
    return repo


def usd(model: str, tokens_in: int, tokens_out: int, cache_read: int = 0) -> float:
    price = {SONNET: (3.0, 15.0, 0.30), HAIKU: (1.0, 5.0, 0.10)}[model]
    return (tokens_in * price[0] + tokens_out * price[1] + cache_read * price[2]) / 1e6


def test_cost_json_sums_per_iteration_agent_model_and_total(project: Path) -> None:
    result = soda("cost", "--json", cwd=project)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert set(report) == {"iterations", "agents", "models", "total"}
    by_iteration = {row["iteration"]: row for row in report["iterations"]}
    assert list(by_iteration) == [None, 1, 2]
    one = usd(SONNET, 100_000, 10_000) + usd(HAIKU, 200_000, 20_000)
    two = usd(HAIKU, 50_000, 5_000, 400_000) + usd(HAIKU, 1_000, 100)
    outside = usd(HAIKU, 10, 1)
    assert by_iteration[1] == {
        "iteration": 1,
        "calls": 2,
        "tokens_in": 300_000,
        "tokens_out": 30_000,
        "cost_usd": round(one, 6),
    }
    assert by_iteration[2]["tokens_in"] == 451_000  # cache reads count as tokens in
    assert by_iteration[2]["cost_usd"] == pytest.approx(two)
    assert by_iteration[None]["calls"] == 1
    agents = {row["agent"]: row for row in report["agents"]}
    assert [row["agent"] for row in report["agents"]] == ["assessor", "executor", "doctor"]
    assert agents["executor"]["calls"] == 3
    assert agents["executor"]["cost_usd"] == pytest.approx(two + usd(HAIKU, 200_000, 20_000))
    models = {row["model"]: row for row in report["models"]}
    assert models[SONNET]["cost_usd"] == pytest.approx(usd(SONNET, 100_000, 10_000))
    assert models[HAIKU]["calls"] == 4
    total = report["total"]
    assert total["calls"] == 5
    assert total["cost_usd"] == pytest.approx(one + two + outside)
    assert total["tokens_out"] == 10_000 + 20_000 + 5_000 + 100 + 1


def test_cost_table_for_people(project: Path) -> None:
    result = soda("cost", cwd=project)
    assert result.returncode == 0, result.stderr
    for title in ("cost by iteration", "cost by agent", "cost by model"):
        assert title in result.stdout
    total = usd(SONNET, 100_000, 10_000) + usd(HAIKU, 200_000, 20_000)
    total += usd(HAIKU, 50_000, 5_000, 400_000) + usd(HAIKU, 1_000, 100) + usd(HAIKU, 10, 1)
    assert result.stdout.splitlines()[-1] == (
        f"total: 5 calls, 751,010 tokens in, 35,101 out, ${total:.4f}"
    )


def test_cost_with_no_calls(repo: Path) -> None:
    assert soda("init", cwd=repo).returncode == 0
    assert "nothing spent" in soda("cost", cwd=repo).stdout
    report = json.loads(soda("cost", "--json", cwd=repo).stdout)
    assert report["total"] == {"calls": 0, "tokens_in": 0, "tokens_out": 0, "cost_usd": 0.0}
    assert report["iterations"] == report["agents"] == report["models"] == []
