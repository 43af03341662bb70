"""The coding CLIs as executors, for real: Claude Code and Codex at their pinned
versions, in soda's jail, talking to a streaming stand-in API through soda's
egress proxy; their work gated and merged like the built-in executor's."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from soda.cli.report import show_iteration
from soda.errors import CredentialsError
from soda.loop import rules_text
from soda.loop.run import run_loop
from tests.cli_executors import KEY_ENV, SECRET, cli_project, outcome, run_once, scripted
from tests.conftest import git
from tests.fakestream import StreamAPI
from tests.plan_fakes import fake_model, open_session, plan, task


@pytest.fixture
def api() -> Iterator[StreamAPI]:
    server = StreamAPI(scripted("mkdir -p notes && printf 'Task a\\n' > notes/a.txt"))
    server.start()
    yield server
    server.close()


@pytest.mark.parametrize("backend", ["claude-code", "codex"])
def test_a_task_done_by_the_cli_merges_through_the_gate(
    tmp_path: Path, api: StreamAPI, backend: str
) -> None:
    model = "claude-sonnet-4-6" if backend == "claude-code" else "gpt-5-codex"
    root = cli_project(tmp_path, backend, api, model=model)
    session = run_once(root)
    assert outcome(session) == "merged"
    assert git(root, "show", "soda/spec:notes/a.txt") == "Task a"
    # The model saw soda's proxy put the real key on every call; soda counted each.
    calls = api.model_requests()
    assert calls
    keys = {c.headers.get("x-api-key") or c.headers.get("authorization") for c in calls}
    assert keys <= {SECRET, f"Bearer {SECRET}"}
    rows = list(session.db["agent_calls"].rows_where("agent = ?", [f"executor:{backend}"]))
    assert len(rows) == len(calls)
    assert all(r["input_tokens"] and r["output_tokens"] and r["cache_read_tokens"] for r in rows)
    assert {r["model"] for r in rows} == {model}
    assert {r["provider"] for r in rows} == {"anthropic" if backend == "claude-code" else "openai"}
    assert sum(r["cost_usd"] for r in rows) > 0
    assert {r["price_source"] for r in rows} == {"soda.toml"}  # STAND_IN_PRICES
    kinds = [r["kind"] for r in session.db["events"].rows_where("kind LIKE 'executor.%'")]
    assert "executor.tool" in kinds and "executor.said" in kinds
    ends = [r["data_json"] for r in session.db["events"].rows_where("kind = 'agent.end'")]
    assert f'"agent": "executor:{backend}"' in ends[-1] and '"outcome": "answered"' in ends[-1]
    # `soda show`: what the CLI said and which tools it called, and its calls.
    shown = show_iteration(session.db, 1)
    tool = "Bash" if backend == "claude-code" else "shell"
    assert re.search(rf"executor\.tool .*text={tool} .*notes/a\.txt", shown), shown
    assert re.search(r"executor\.said .*text=wrote the note", shown), shown
    assert f"executor:{backend} {model} t1:" in shown
    session.finish_run("done", "test")


def test_a_plan_task_may_ask_for_an_allowed_cli(tmp_path: Path, api: StreamAPI) -> None:
    root = cli_project(tmp_path, "claude-code", api, default="builtin", allowed=["claude-code"])
    asked = {**task("a"), "tool_hints": ["executor:claude-code"]}
    plain = {**task("b"), "tool_hints": ["executor:codex"]}  # not allowed: the built-in agent
    os.environ[KEY_ENV] = SECRET
    session = open_session(root, fake_model(plan(asked, plain)))
    assert '"executor:claude-code"' in rules_text.tests_and_merges(session.config, "planner")
    run_loop(session, lambda line: None, once=True)
    assert outcome(session) == "merged"
    assert git(root, "show", "soda/spec:notes/a.txt") == "Task a"  # the CLI's work
    assert git(root, "show", "soda/spec:notes/b.txt") == "Task b"  # the built-in's
    started = [r["data_json"] for r in session.db["events"].rows_where("kind = 'executor.start'")]
    assert len(started) == 1 and "claude-code" in started[0]
    session.finish_run("done", "test")


def test_a_missing_key_is_the_persons_to_fix_and_starts_nothing(
    tmp_path: Path, api: StreamAPI
) -> None:
    root = cli_project(tmp_path, "claude-code", api, api_key_env="SODA_TEST_NO_SUCH_KEY")
    session = open_session(root, fake_model(plan(task("a"))))
    with pytest.raises(CredentialsError, match="SODA_TEST_NO_SUCH_KEY") as raised:
        run_loop(session, lambda line: None, once=True)
    assert raised.value.exit_code == 2  # one line for the person, exit 2
    (row,) = list(session.db["iterations"].rows)
    assert row["outcome"] == "error"
    assert "environment variable SODA_TEST_NO_SUCH_KEY" in row["error"]
    assert not api.requests  # the CLI never started
    session.finish_run("done", "test")


@pytest.mark.parametrize("backend", ["claude-code", "codex"])
def test_a_task_whose_cli_breaks_a_test_is_refused_like_any_other(
    tmp_path: Path, backend: str
) -> None:
    """The CLI's work meets the same gate: `add` made to subtract fails a test the
    milestone passed, so nothing merges and the milestone keeps its `add`."""
    server = StreamAPI(scripted("sed -i 's/return a + b/return a - b/' calc.py"))
    server.start()
    try:
        model = "claude-sonnet-4-6" if backend == "claude-code" else "gpt-5-codex"
        root = cli_project(tmp_path, backend, server, model=model)
        session = run_once(root)
        assert outcome(session) == "gate_failed"
        # The CLI made its change, and the gate's run of it failed `add`'s test.
        failed = [json.loads(r["report_json"])["failed"] for r in session.db["test_results"].rows]
        assert any(any("test_add" in name for name in names) for names in failed), failed
        milestone = git(root, "show", "soda/spec:calc.py")
        assert "return a + b" in milestone and "return a - b" not in milestone
        session.finish_run("done", "test")
    finally:
        server.close()
