"""The loop through the real anthropic SDK against the local Messages-API server:
a full iteration, usage and cost, the budget, transient failures, HALTs and a bad key."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from soda.cli.demo import prepare
from soda.config import load
from soda.loop.run import Ending, run_loop
from soda.loop.session import Session
from tests.fakeapi import (
    FakeAPI,
    Reply,
    message_response,
    overloaded,
    refusal_response,
    tool_use_response,
    unauthorized,
    usage,
)

pytest_plugins = ("tests.fakeapi",)

ROOT = Path(__file__).resolve().parent.parent
DEMO = json.loads((ROOT / "soda" / "demo" / "script.json").read_text())["responses"]
PYTHON = json.dumps(sys.executable)[1:-1]
TOKENS = usage(
    input_tokens=1000,
    output_tokens=200,
    cache_creation_input_tokens=3000,
    cache_read_input_tokens=5000,
)


def wire(entry: dict[str, Any]) -> Reply:
    """A scripted-provider entry as the Messages API would send it."""
    blocks: list[dict[str, Any]] = []
    if entry.get("text"):
        blocks.append({"type": "text", "text": entry["text"]})
    for n, call in enumerate(entry["tool_calls"]):
        data = json.loads(json.dumps(call["input"]).replace("{python}", PYTHON))
        blocks.append(
            {
                "type": "tool_use",
                "id": f"toolu_{id(entry)}_{n}",
                "name": call["name"],
                "input": data,
            }
        )
    return message_response(blocks, stop_reason="tool_use", tokens=TOKENS)


SONNET_PRICE = """
[model.prices."claude-sonnet-4-6"]
input = 3.0
output = 15.0
cache_write = 3.75
cache_read = 0.3
"""
"""The fake API is on 127.0.0.1, where soda takes a model to be local and free:
priced here as the real API prices it."""


def configure(root: Path, fake_api: FakeAPI, extra: str = "") -> Path:
    """Switch the demo project from the scripted provider to Anthropic at the fake API."""
    path = root / "soda.toml"
    text = path.read_text()
    text = text.replace('provider = "scripted"', 'provider = "anthropic"')
    text = text.replace('strong = "scripted"', 'strong = "claude-sonnet-4-6"')
    text = text.replace('fast = "scripted"', 'fast = "claude-sonnet-4-6"')
    text = text.replace("# base_url = (not set)", f'base_url = "{fake_api.url}"')
    text = text.replace("max_retry_wait = 120.0", "max_retry_wait = 3.0")
    text = text.replace("max_retries = 4", "max_retries = 2")
    path.write_text(text + extra + SONNET_PRICE)
    return path


@pytest.fixture
def root(tmp_path: Path, fake_api: FakeAPI, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-real")
    project = tmp_path / "project"
    prepare(project)
    configure(project, fake_api)
    return project


def run(root: Path, **kwargs: Any):
    lines: list[str] = []
    session = Session.open(load(root / "soda.toml"))
    return run_loop(session, lines.append, **kwargs), session


def test_full_demo_through_the_real_client(root: Path, fake_api: FakeAPI) -> None:
    fake_api.enqueue(*[wire(entry) for entry in DEMO])
    result, session = run(root)
    assert result.ending is Ending.DONE
    rows = list(session.db["agent_calls"].rows)
    assert len(rows) == len(DEMO)
    assert {r["provider"] for r in rows} == {"anthropic"}
    first = rows[0]
    assert (first["input_tokens"], first["output_tokens"]) == (1000, 200)
    assert (first["cache_creation_tokens"], first["cache_read_tokens"]) == (3000, 5000)
    # Sonnet 4.6: 1000*3 + 200*15 + 3000*3.75 + 5000*0.30 per million.
    assert first["cost_usd"] == pytest.approx(0.01875)
    iteration = next(iter(session.db["iterations"].rows))
    assert iteration["cost_usd"] == pytest.approx(0.01875 * 10)
    request = fake_api.requests[0].body
    # Four cache markers, the API's limit, all on the first message's parts: the
    # spec, the tests and merges, the standing work, then the rolling one on its end.
    parts = request["messages"][0]["content"]
    assert [block["text"].split("\n")[0] for block in parts] == [
        "## Spec",
        "## Tests And Merges",
        "## Claims",
        "## Claims (continued)",
    ]
    assert all(block["cache_control"] == {"type": "ephemeral"} for block in parts)
    assert "cache_control" not in request["system"][-1]
    assert "cache_control" not in request["tools"][-1]
    assert request["tool_choice"] == {"type": "auto"}  # the demo's prose before its calls
    # The planner's first message carries the repository map of the tip as a
    # lasting part, after the spec and the tests and merges and before the
    # claims (the demo's small map shares the standing work's marker: five parts,
    # three markers); its count of files goes with what changes every iteration.
    planner = next(
        r.body
        for r in fake_api.requests
        if r.body["system"][0]["text"].startswith("You are the planner")
    )
    parts = planner["messages"][0]["content"]
    assert [block["text"].split("\n")[0] for block in parts] == [
        "## Spec",
        "## Tests And Merges",
        "## Repo Map",
        "## Repo Map (continued)",
    ]
    assert parts[2]["text"].startswith("## Repo Map\n\nREADME.md\n")
    assert "\n\n## Claims\n\n" in parts[2]["text"]
    assert "calc.py\n  def add(" in parts[2]["text"]
    assert parts[3]["text"].startswith("## Repo Map (continued)\n\n[")
    assert all(block["cache_control"] == {"type": "ephemeral"} for block in parts)
    show = subprocess.run(
        [sys.executable, "-m", "soda", "show", "1"], cwd=root, capture_output=True, text=True
    )
    assert "cache 3000/5000" in show.stdout and "10 calls, $0.1875" in show.stdout


def test_budget_smaller_than_one_call_is_stuck_naming_the_budget(
    root: Path, fake_api: FakeAPI
) -> None:
    text = (root / "soda.toml").read_text().replace("max_cost_usd = 10.0", "max_cost_usd = 0.001")
    (root / "soda.toml").write_text(text)
    fake_api.enqueue(wire(DEMO[0]))
    result, session = run(root)
    assert result.ending is Ending.STUCK
    assert "max_cost_usd" in result.reason and "[budget]" in result.reason
    assert session.db.execute("SELECT outcome FROM iterations").fetchone()[0] == "budget"


def test_exhausted_retries_end_the_iteration_as_transient_and_resume(
    root: Path, fake_api: FakeAPI
) -> None:
    subprocess.run(
        [sys.executable, "-m", "soda", "tell", "prefer small functions"], cwd=root, check=False
    )
    fake_api.enqueue(overloaded(), overloaded(), overloaded())
    result, session = run(root)
    assert result.ending is Ending.TRANSIENT
    assert result.ending.exit_code == 5
    retries = session.db.execute("SELECT count(*) FROM events WHERE kind = 'provider.retry'")
    assert retries.fetchone()[0] == 2
    row = next(iter(session.db["iterations"].rows))
    assert row["outcome"] == "transient" and row["ended_at"] is not None
    # Nothing lost: the person's input is back to pending, and the next run resumes.
    statuses = [r[0] for r in session.db.execute("SELECT status FROM human_inputs")]
    assert statuses in ([], ["pending"])
    fake_api.enqueue(*[wire(entry) for entry in DEMO])
    again, session2 = run(root)
    assert again.ending is Ending.DONE
    numbers = [r[0] for r in session2.db.execute("SELECT number FROM iterations ORDER BY number")]
    assert numbers == [1, 2, 3]


def test_schema_violating_answer_halts_with_the_path(root: Path, fake_api: FakeAPI) -> None:
    bad = {
        "checks": [],
        "task_updates": [{"task_id": 1, "action": "delete", "reason": "x"}],
        "learnings": [],
        "summary": "s",
        "learning_verdicts": [],
    }
    # The first broken answer goes back to the model; the repeat halts.
    fake_api.enqueue(*[tool_use_response("submit", bad, tokens=TOKENS)] * 2)
    result, session = run(root)
    assert result.ending is Ending.HALT
    halt = next(iter(session.db["halts"].rows))
    assert halt["violation_path"] == "$.task_updates[0].action"
    assert halt["agent"] == "verifier"


def test_refusal_halts_with_the_reason(root: Path, fake_api: FakeAPI) -> None:
    fake_api.enqueue(refusal_response())
    result, session = run(root)
    assert result.ending is Ending.HALT
    halt = next(iter(session.db["halts"].rows))
    assert halt["error_type"] == "ModelStopped"
    assert "refused" in halt["message"]


def test_max_tokens_twice_is_an_ordinary_failure_not_a_halt(root: Path, fake_api: FakeAPI) -> None:
    """A truncated answer is retried once with a higher limit; truncated again,
    the iteration ends as an ordinary (transient) failure, with no HALT."""
    cut = message_response([{"type": "text", "text": "{"}], stop_reason="max_tokens")
    fake_api.enqueue(cut)
    fake_api.enqueue(cut)
    result, session = run(root)
    assert result.ending is Ending.TRANSIENT
    assert "max_tokens" in result.reason
    assert session.db["halts"].count == 0


def test_bad_key_is_one_line_about_the_key(root: Path, fake_api: FakeAPI) -> None:
    fake_api.enqueue(unauthorized())
    result = subprocess.run(
        [sys.executable, "-m", "soda", "run", "--once"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("soda:")]
    assert len(errors) == 1 and "ANTHROPIC_API_KEY" in errors[0]
    assert "Traceback" not in result.stderr
