"""Prices that cannot silently be zero: genai-prices' data for the models soda
does not know, a person's `[model.prices]` winning, loopback endpoints and the
scripted model free, every call keeping where its price came from (`soda cost`),
a model soda cannot price refused at start unless a token budget binds it, and
`[budget] max_tokens_per_run` ending a run STUCK whatever the model."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import genai_prices
import pytest

from soda.agent.budget import budget_lines, check_before_iteration
from soda.agent.pricing import check_priced, price_lines
from soda.agent.recorder import CallRecorder
from soda.cli.demo import prepare
from soda.config import BudgetConfig, Config, ExecutorConfig, ModelConfig, Price, load
from soda.daemon.process import Daemon
from soda.errors import BudgetExhausted, ConfigError
from soda.events import Events
from soda.llm.base import ModelResponse, Usage
from soda.llm.function import FunctionModel, Reply
from soda.llm.prices import is_loopback
from soda.loop.run import Ending, run_loop
from soda.loop.session import Session
from soda.store import open_db
from soda.system.lock import release_lock
from tests.conftest import insert_run, soda
from tests.fakeapi import FakeAPI, serve
from tests.fakeopenai import completion, error_reply
from tests.plan_fakes import fake_model, new_project, plan, task

CATALOG = f"genai-prices {genai_prices.__version__}"
UNKNOWN_MODEL = "mystery-model-7b"
REMOTE = "https://models.example.invalid/v1"


def response(model: str, usage: Usage) -> ModelResponse:
    return ModelResponse("", [], "end_turn", usage, model)


def catalog_usd(model: str, provider: str, usage: Usage) -> float:
    """What genai-prices itself says `usage` costs (its input counts the cache too)."""
    cached = usage.cache_creation_tokens + usage.cache_read_tokens
    calculation = genai_prices.calc_price(
        genai_prices.Usage(
            input_tokens=usage.input_tokens + cached,
            output_tokens=usage.output_tokens,
            cache_write_tokens=usage.cache_creation_tokens,
            cache_read_tokens=usage.cache_read_tokens,
        ),
        model,
        provider_id=provider,
    )
    assert calculation.total_price > Decimal(0)
    return float(calculation.total_price)


def recorder(tmp_path: Path, config: Config, provider: str = "anthropic") -> CallRecorder:
    db = open_db(tmp_path / "soda.db")
    recording = CallRecorder(db, config, provider, Events(db))
    recording.run_id = insert_run(db)
    return recording


def stored(recording: CallRecorder) -> list[tuple[str, float, str]]:
    rows = recording.db.execute("SELECT model, cost_usd, price_source FROM agent_calls ORDER BY id")
    return [(model, cost, source) for model, cost, source in rows]


USAGE = Usage(input_tokens=12_000, output_tokens=3_000, cache_read_tokens=40_000)


def test_a_model_not_in_the_old_table_is_priced_by_genai_prices(tmp_path: Path) -> None:
    # claude-sonnet-4-5 (soda's own table knew 3 models; it was not one) at the
    # Anthropic API, and Codex's default model at OpenAI's, as the proxy records it.
    recording = recorder(tmp_path, Config(model=ModelConfig(strong="claude-sonnet-4-5")))
    recording("planner", response("claude-sonnet-4-5", USAGE), 1)
    recording(
        "executor:codex",
        response("gpt-5-codex", USAGE),
        1,
        None,
        "openai",
        "https://api.openai.com",
    )
    sonnet = catalog_usd("claude-sonnet-4-5", "anthropic", USAGE)
    codex = catalog_usd("gpt-5-codex", "openai", USAGE)
    assert stored(recording) == [
        ("claude-sonnet-4-5", pytest.approx(sonnet), CATALOG),
        ("gpt-5-codex", pytest.approx(codex), CATALOG),
    ]
    assert recording.cost_usd == pytest.approx(sonnet + codex)


def test_a_price_in_soda_toml_wins_everywhere(tmp_path: Path) -> None:
    mine = Price(input=100.0, output=1000.0, cache_read=1.0)
    config = Config(model=ModelConfig(prices={"claude-sonnet-4-5": mine, "local-model": mine}))
    recording = recorder(tmp_path, config)
    recording("planner", response("claude-sonnet-4-5", USAGE), 1)
    # Even on a loopback endpoint, where a model is otherwise free.
    recording("executor", response("local-model", USAGE), 1, None, "openai", "http://127.0.0.1:9")
    usd = (12_000 * 100.0 + 3_000 * 1000.0 + 40_000 * 1.0) / 1e6
    assert stored(recording) == [
        ("claude-sonnet-4-5", pytest.approx(usd), "soda.toml"),
        ("local-model", pytest.approx(usd), "soda.toml"),
    ]
    assert usd != pytest.approx(catalog_usd("claude-sonnet-4-5", "anthropic", USAGE))


def test_loopback_and_the_fakes_are_free_and_say_so(tmp_path: Path) -> None:
    assert [
        is_loopback(url)
        for url in (
            "http://127.0.0.1:11434/v1",
            "http://localhost:8000",
            "http://[::1]:8080/v1",
            "http://127.3.2.1",
            "https://10.0.0.7/v1",
            "https://localhost.example.com",
            None,
        )
    ] == [True, True, True, True, False, False, False]
    config = Config(model=ModelConfig(provider="openai", base_url="http://localhost:11434/v1"))
    recording = recorder(tmp_path, config, provider="openai")
    recording("planner", response("gpt-4o", USAGE), 1)  # a known name, but served here
    scripted = recorder(tmp_path / "demo", Config(), provider="scripted")
    scripted("planner", response("claude-sonnet-4-6", USAGE), 1)
    assert stored(recording) == [("gpt-4o", 0.0, "local")]
    assert stored(scripted) == [("claude-sonnet-4-6", 0.0, "local")]


def test_an_unknown_model_is_refused_only_without_a_token_budget() -> None:
    model = ModelConfig(provider="openai", base_url=REMOTE, strong=UNKNOWN_MODEL, fast="gpt-4o")
    with pytest.raises(ConfigError) as refused:
        check_priced(Config(model=model), "openai")
    (line,) = str(refused.value).splitlines()
    assert f'"{UNKNOWN_MODEL}" (model.strong at {REMOTE})' in line
    assert f'[model.prices."{UNKNOWN_MODEL}"]' in line and "max_tokens_per_run" in line
    assert "gpt-4o" not in line  # genai-prices knows the fast one
    # The second fix: a token budget binds every model, priced or not.
    check_priced(Config(model=model, budget=BudgetConfig(max_tokens_per_run=5_000_000)), "openai")
    # The coding CLIs' models are priced the same way: Codex's default by genai-prices.
    lines = price_lines(Config(executor=ExecutorConfig(backend="codex")), "anthropic")
    codex = next(line for line in lines if line.startswith("executor codex gpt-5-codex: "))
    assert codex.endswith(f"({CATALOG}, as openai gpt-5)")
    unknown = Config(executor=ExecutorConfig(backend="codex", model=UNKNOWN_MODEL))
    with pytest.raises(ConfigError, match="executor codex at https://api.openai.com"):
        check_priced(unknown, "anthropic")


def configure(root: Path, base_url: str, settings: str = "") -> None:
    """The demo project switched to an OpenAI-compatible endpoint serving UNKNOWN_MODEL."""
    path = root / "soda.toml"
    text = path.read_text()
    for old, new in (
        ('provider = "scripted"', 'provider = "openai"'),
        ('strong = "scripted"', f'strong = "{UNKNOWN_MODEL}"'),
        ('fast = "scripted"', f'fast = "{UNKNOWN_MODEL}"'),
        ("# base_url = (not set)", f'base_url = "{base_url}"'),
        ("max_retries = 4", "max_retries = 0"),
    ):
        assert old in text, old
        text = text.replace(old, new, 1)
    path.write_text(text + settings)


def test_soda_run_refuses_an_unpriced_remote_model_with_one_line(tmp_path: Path) -> None:
    root = tmp_path / "project"
    prepare(root)
    configure(root, REMOTE)
    result = soda("run", "--once", cwd=root)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f'soda: soda.toml: no price for model "{UNKNOWN_MODEL}"')
    assert f'([model.prices."{UNKNOWN_MODEL}"] input = ..., output = ...' in line
    assert "([budget] max_tokens_per_run = N)" in line
    db = open_db(root / "state" / "soda.db")
    assert db.execute("SELECT count(*) FROM runs").fetchone()[0] == 0  # nothing started
    doctor = soda("doctor", cwd=root)
    prices = [row for row in doctor.stdout.splitlines() if row.split()[1:2] == ["prices"]]
    assert prices and prices[0].startswith("FAIL") and UNKNOWN_MODEL in prices[0]
    # With a token budget instead, the same model is let through.
    text = (root / "soda.toml").read_text()
    assert text.count("max_tokens_per_run = 0\n") == 1  # soda init wrote the key
    (root / "soda.toml").write_text(
        text.replace("max_tokens_per_run = 0\n", "max_tokens_per_run = 10000000\n")
    )
    prices = [row for row in soda("doctor", cwd=root).stdout.splitlines() if " prices " in row]
    assert prices[0].startswith("pass") and f"{UNKNOWN_MODEL}: no price (unknown)" in prices[0]


@pytest.fixture
def local_openai() -> Any:
    yield from serve(FakeAPI(path="/v1/chat/completions", require_key=False))


def test_the_same_model_on_127_0_0_1_starts_and_costs_nothing(
    tmp_path: Path, local_openai: FakeAPI
) -> None:
    root = tmp_path / "project"
    prepare(root)
    configure(root, f"{local_openai.url}/v1")
    local_openai.enqueue(completion({"role": "assistant", "content": "thinking"}))
    local_openai.enqueue(error_reply(400, "that is all this stand-in says"))
    result = soda("run", "--once", cwd=root)
    assert "no price" not in result.stderr
    assert result.returncode == 4, result.stderr  # started, and halted at the stand-in's 400
    assert len(local_openai.requests) == 2
    db = open_db(root / "state" / "soda.db")
    rows = db.execute("SELECT cost_usd, price_source, input_tokens FROM agent_calls").fetchall()
    assert rows == [(0.0, "local", 100)]
    cost = json.loads(soda("cost", "--json", cwd=root).stdout)
    assert cost["total"]["cost_usd"] == 0.0
    assert [row["price_source"] for row in cost["models"]] == ["local"]


def test_soda_cost_shows_where_each_price_came_from(tmp_path: Path) -> None:
    root = tmp_path / "project"
    prepare(root)
    config = load(root / "soda.toml")
    config.model.prices["house-model"] = Price(input=2.0, output=4.0)
    db = open_db(config.db_path)
    for provider, model, endpoint in (
        ("anthropic", "claude-opus-4-1", "https://api.anthropic.com"),
        ("openai", "house-model", REMOTE),
        ("openai", "qwen2.5:7b", "http://127.0.0.1:11434/v1"),
        ("openai", UNKNOWN_MODEL, REMOTE),
    ):
        recording = CallRecorder(db, config, "scripted", Events(db))
        recording("executor", response(model, USAGE), 1, None, provider, endpoint)
    report = json.loads(soda("cost", "--json", cwd=root).stdout)
    sources = {row["model"]: row["price_source"] for row in report["models"]}
    assert sources == {
        "claude-opus-4-1": CATALOG,
        "house-model": "soda.toml",
        "qwen2.5:7b": "local",
        UNKNOWN_MODEL: "unknown",
    }
    table = soda("cost", cwd=root).stdout.split("cost by model", 1)[1]
    assert "price source" in table
    rows = {line.split()[1]: line for line in table.splitlines() if line.startswith("│ ")}
    assert "genai-prices" in rows["claude-opus-4-1"]  # its version may wrap to the next line
    assert "soda.toml" in rows["house-model"] and "local" in rows["qwen2.5:7b"]


def with_usage(answer: Any, tokens: int) -> Any:
    """`answer`, each reply reporting `tokens` tokens in and a tenth of that out."""

    def counted(request: Any) -> Reply:
        reply = answer(request)
        assert isinstance(reply, dict)
        return {**reply, "usage": {"input_tokens": tokens, "output_tokens": tokens // 10}}

    return counted


def test_max_tokens_per_run_ends_the_run_stuck_naming_the_key(tmp_path: Path) -> None:
    root = new_project(tmp_path, {"max_tokens_per_run = 0": "max_tokens_per_run = 10000"})
    inner = fake_model(plan(task("a")))
    model = FunctionModel(with_usage(inner.answer, 3000))  # 3,300 tokens a call, free
    session = Session.open(load(root / "soda.toml"), model=model)
    lines: list[str] = []
    result = run_loop(session, lines.append)
    assert result.ending is Ending.STUCK, lines
    assert "max_tokens_per_run 10,000" in result.reason
    assert "raise [budget] max_tokens_per_run" in result.reason
    used = session.recorder.run_tokens()
    assert 10_000 < used <= 10_000 + 3 * 3_300  # stopped at the call that passed it
    assert session.recorder.run_cost() == 0.0  # a $0 model: only the token budget binds
    assert session.db.execute("SELECT outcome FROM iterations").fetchall() == [("budget",)]
    assert session.db.execute("SELECT status FROM runs").fetchone()[0] == "stuck"
    spent = f"budget.max_tokens_per_run: {used:,} of 10,000 (run 1, stuck) - SPENT"
    assert spent in budget_lines(session.config, session.db)
    with pytest.raises(BudgetExhausted, match="max_tokens_per_run"):
        check_before_iteration(session.config, session.db)  # no call to learn it again
    status = json.loads(soda("status", "--json", cwd=root).stdout)
    (row,) = [b for b in status["budgets"] if b["key"] == "budget.max_tokens_per_run"]
    assert (row["used"], row["limit"], row["spent"]) == (used, 10_000, True)
    assert spent in soda("budget", cwd=root).stdout


def test_a_reload_to_an_unpriced_executor_model_is_refused(tmp_path: Path) -> None:
    config_path = prepare(tmp_path / "project")
    daemon = Daemon(config_path)
    run = daemon._preflight()
    session = run._session  # the loop's own: the test reads its record
    try:
        before = daemon.config
        text = config_path.read_text()
        config_path.write_text(
            re.sub(r"\n\[executor\]\n", f'\n[executor]\nmodel = "{UNKNOWN_MODEL}"\n', text).replace(
                'backend = "builtin"', 'backend = "codex"'
            )
        )
        daemon._reload(run)  # Codex at the OpenAI API: no price, no token budget
        assert daemon.config is before and session.recorder.config is before
        (kind, data) = session.db.execute(
            "SELECT kind, data_json FROM events WHERE kind LIKE 'config.%'"
        ).fetchone()
        assert kind == "config.reload_failed"
        assert f'no price for model "{UNKNOWN_MODEL}" (executor codex' in json.loads(data)["error"]
    finally:
        session.finish_run("stopped", "test over")
        release_lock(daemon.config.state_dir)
        session.db.conn.close()
