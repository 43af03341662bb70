"""The effectiveness harness (bench/effectiveness/) proven offline: soda runs on
real task repositories with the behavioural fake model; the loop, the gate, the
jail and the acceptance step are real. A fake that solves is judged solved, a
fake that claims DONE with a plausible wrong change is judged unsolved by the
hidden tests, and a run that never ends is stopped at its timeout while the
suite goes on."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from bench.effectiveness.check import check_task
from bench.effectiveness.fake import applied, fake_model, shown_text, tool_call
from bench.effectiveness.harness import ModelChoice, TaskResult, run_suite
from bench.effectiveness.report import table, totals
from bench.effectiveness.run import main as run_main
from bench.effectiveness.suite import (
    Change,
    Edit,
    Task,
    TaskError,
    all_tasks,
    load_task,
    select,
)
from soda.agent.definition import load_agent
from soda.llm.base import Message, ModelRequest, ToolCall, ToolResult, ToolSpec
from soda.llm.function import FunctionModel
from tests.conftest import git
from tests.fakeapi import FakeAPI, Reply, api_key_of, message_response, usage

pytest_plugins = ("tests.fakeapi",)

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "bench" / "effectiveness" / "run.py"
ROW_KEYS = {
    "task",
    "title",
    "difficulty",
    "solved",
    "ending",
    "reason",
    "iterations",
    "calls",
    "tokens_in",
    "tokens_out",
    "cost_usd",
    "wall_s",
    "acceptance",
    "workdir",
}
TOTAL_KEYS = {
    "tasks",
    "solved",
    "solve_rate",
    "iterations",
    "calls",
    "tokens_in",
    "tokens_out",
    "cost_usd",
    "wall_s",
}


def task(name: str) -> Task:
    return select(all_tasks(), name)[0]


def test_fake_model_solves_two_tasks_through_the_command_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(RUN), "--model", "fake", "--tasks", "off-by-one,cli-flag", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)  # stdout holds only the report
    assert set(report) == {"model", "tasks", "totals"}
    assert report["model"]["fake"] == "solve"
    rows = report["tasks"]
    assert [row["task"] for row in rows] == ["off-by-one", "cli-flag"]
    for row in rows:
        assert set(row) == ROW_KEYS
        assert row["solved"] is True, row
        assert row["ending"] == "done"
        assert row["iterations"] >= 1
        assert row["calls"] >= 4 and row["tokens_in"] > 0 and row["tokens_out"] > 0
        assert row["cost_usd"] == 0
        assert row["wall_s"] > 0
        assert row["workdir"] is None  # temporary: removed
        acceptance = row["acceptance"]
        assert acceptance["solved"] and acceptance["passed"] == acceptance["total"] > 0
        assert acceptance["own_failed"] == 0
    assert set(report["totals"]) == TOTAL_KEYS
    assert report["totals"]["solved"] == 2 and report["totals"]["solve_rate"] == 1.0
    assert report["totals"]["iterations"] == sum(row["iterations"] for row in rows)
    assert "off-by-one: solved" in done.stderr  # progress on stderr


AGENTS = ("verifier", "assessor", "planner", "orienter", "executor", "retrier", "planning_mode")


def as_request(body: dict[str, Any]) -> ModelRequest:
    """A Messages-API request body as the ModelRequest the fake answers."""
    system = "".join(block["text"] for block in body.get("system", []))
    agent = next(name for name in AGENTS if load_agent(name).system == system)
    messages = []
    for message in body["messages"]:
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        text = "".join(b["text"] for b in blocks if b["type"] == "text")
        calls = [
            ToolCall(b["id"], b["name"], b["input"]) for b in blocks if b["type"] == "tool_use"
        ]
        results = [
            ToolResult(b["tool_use_id"], _text(b.get("content", "")), b.get("is_error", False))
            for b in blocks
            if b["type"] == "tool_result"
        ]
        messages.append(Message(message["role"], text, calls, results))
    tools = [
        ToolSpec(t["name"], t.get("description", ""), t["input_schema"]) for t in body["tools"]
    ]
    return ModelRequest(agent, body["model"], system, messages, tools, "submit")


def _text(content: str | list[dict[str, Any]]) -> str:
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


def on_the_wire(fake: FunctionModel) -> Callable[[Any], Reply]:
    """The fake model answering as the Messages API would."""

    def respond(body: Any) -> Reply:
        answer = fake.complete(as_request(body))
        blocks: list[dict[str, Any]] = (
            [{"type": "text", "text": answer.text}] if answer.text else []
        )
        blocks += [
            {"type": "tool_use", "id": f"toolu_{call.id}", "name": call.name, "input": call.input}
            for call in answer.tool_calls
        ]
        tokens = usage(answer.usage.input_tokens, answer.usage.output_tokens)
        return message_response(blocks, stop_reason="tool_use", model=body["model"], tokens=tokens)

    return respond


def test_a_real_provider_is_measured_with_one_command(
    fake_api: FakeAPI,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """`--provider anthropic --model ...`: soda's real Anthropic provider, pointed at
    a local Messages-API server where the fake answers; its calls are priced (by
    --config: a model on 127.0.0.1 is otherwise local and free)."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-real")
    fake_api.respond = on_the_wire(fake_model(task("off-by-one")))
    config = tmp_path / "prices.toml"
    config.write_text('[model.prices."claude-sonnet-4-6"]\ninput = 3.0\noutput = 15.0\n')
    argv = ["--provider", "anthropic", "--model", "claude-sonnet-4-6", "--base-url", fake_api.url]
    argv += ["--config", str(config)]
    assert run_main([*argv, "--tasks", "off-by-one", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["model"]["provider"] == "anthropic"
    assert report["model"]["strong"] == report["model"]["fast"] == "claude-sonnet-4-6"
    row = report["tasks"][0]
    assert row["solved"] is True, row
    assert row["calls"] == len(fake_api.requests) >= 4
    assert row["cost_usd"] > 0  # the price in --config applies to the reported usage
    assert {api_key_of(r.headers) for r in fake_api.requests} == {"sk-ant-test-not-real"}


def test_a_plausible_wrong_change_is_done_but_unsolved(tmp_path: Path) -> None:
    """The fake fixes one of the two files, soda's own tests pass, the assessor
    calls it met: only the acceptance tests know better."""
    rows = run_suite([task("two-file-bug")], ModelChoice.offline("wrong"), tmp_path, keep=True)
    row = rows[0]
    assert row.ending == "done"
    assert row.iterations >= 1
    assert not row.solved
    assert row.acceptance is not None
    assert row.acceptance.own_failed == 0  # the project's own tests pass
    assert any("test_two_notebooks" in name for name in row.acceptance.failing)
    assert 0 < row.acceptance.passed < row.acceptance.total
    # What was judged is what soda merged: the milestone tip, left for a person.
    repo = tmp_path / "two-file-bug" / "repo"
    assert git(repo, "rev-parse", "soda/spec") == row.acceptance.commit
    assert "tax_cents(line.amount" in git(repo, "show", "soda/spec:cart.py")
    assert "round(" in git(repo, "show", "soda/spec:tax.py")
    # The acceptance tests never entered the repository.
    assert "test_accept" not in git(repo, "log", "--all", "--name-only", "--format=")
    text = table(rows, "fake-wrong")
    assert "0/1 (0%)" in text and f"acceptance: {row.acceptance.passed} of " in text


def test_setup_failure_and_timeout_are_unsolved_and_the_suite_goes_on(tmp_path: Path) -> None:
    broken = tmp_path / "tasks" / "broken"
    shutil.copytree(task("off-by-one").folder, broken)
    shutil.rmtree(broken / "files")
    (broken / "generate.py").write_text(
        "def generate(root):\n    raise RuntimeError('no such template')\n"
    )
    stalled = task("off-by-one")
    stalled = dataclasses.replace(
        stalled, limits=dataclasses.replace(stalled.limits, timeout_seconds=2)
    )
    rows = run_suite([load_task(broken), stalled], ModelChoice.offline("stall"), tmp_path / "w")
    assert [(row.task, row.solved, row.ending) for row in rows] == [
        ("broken", False, "setup"),
        ("off-by-one", False, "timeout"),
    ]
    assert "no such template" in rows[0].reason
    assert "2 s (wall clock)" in rows[1].reason
    assert 2 <= rows[1].wall_s < 30
    assert rows[1].iterations == 1
    assert rows[1].acceptance is not None and not rows[1].acceptance.solved
    assert totals(rows)["solved"] == 0


def test_check_catches_a_task_whose_acceptance_tests_already_pass(tmp_path: Path) -> None:
    folder = tmp_path / "too-easy"
    shutil.copytree(task("off-by-one").folder, folder)
    shutil.copy(folder / "solution" / "chunks.py", folder / "files" / "chunks.py")
    problems = check_task(load_task(folder), tmp_path / "work")
    assert any(p.startswith("start: the acceptance tests do not fail") for p in problems)
    assert "solution: changes nothing in the starting repository" in problems
    assert not any(p.startswith("wrong") for p in problems)  # still caught by acceptance


@pytest.mark.slow
def test_every_shipped_task_is_sound(tmp_path: Path) -> None:
    """`run.py --check` on the whole suite: each task's acceptance tests fail at
    the start, pass with solution/, and catch wrong/ (which soda's gate would
    merge: the project's own tests pass with it)."""
    tasks = all_tasks()
    with ThreadPoolExecutor(max_workers=2) as pool:
        found = pool.map(lambda t: (t.name, check_task(t, tmp_path / t.name)), tasks)
        problems = {name: found_here for name, found_here in found if found_here}
    assert problems == {}


def test_shipped_tasks_are_well_formed() -> None:
    tasks = all_tasks()
    assert len(tasks) >= 6
    assert {t.difficulty for t in tasks} == {"easy", "medium", "hard"}
    for each in tasks:
        assert each.acceptance_files, each.name
        assert each.change("solution").paths, each.name
        assert each.change("wrong").paths, each.name
        assert "## Acceptance criteria" in each.spec, each.name
    with pytest.raises(TaskError, match="unknown task"):
        select(tasks, "off-by-one,nope")


def test_task_toml_is_checked(tmp_path: Path) -> None:
    folder = tmp_path / "typo"
    shutil.copytree(task("off-by-one").folder, folder)
    (folder / "task.toml").write_text('title = "x"\ndificulty = "easy"\n')
    with pytest.raises(TaskError, match="unknown key"):
        load_task(folder)


def test_a_pinned_repository_starts_at_its_commit(tmp_path: Path) -> None:
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git(upstream, "init", "-q", "-b", "main")
    (upstream / "lib.py").write_text("VERSION = 1\n")
    git(upstream, "add", ".")
    git(upstream, "commit", "-q", "-m", "one")
    pinned = git(upstream, "rev-parse", "HEAD")
    (upstream / "lib.py").write_text("VERSION = 2\n")
    git(upstream, "commit", "-q", "-am", "two")
    folder = tmp_path / "pinned"
    shutil.copytree(task("off-by-one").folder, folder, ignore=shutil.ignore_patterns("files"))
    (folder / "task.toml").write_text(
        f'title = "p"\n[repo]\ngit = "{upstream}"\nrev = "{pinned}"\n'
    )
    built = tmp_path / "built"
    load_task(folder).build(built)
    assert (built / "lib.py").read_text() == "VERSION = 1\n"
    assert not (built / ".git").exists()


def request_with(tool: ToolSpec) -> ModelRequest:
    return ModelRequest(
        agent="executor", model="fake", system="", messages=[], tools=[tool], answer_tool="submit"
    )


def test_fake_fills_absent_nullable_arguments() -> None:
    spec = ToolSpec(
        "run_command",
        "run",
        {
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "timeout_seconds": {"type": ["number", "null"]},
                "cwd": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            },
        },
    )
    call = tool_call(request_with(spec), "run_command", command="true")
    assert call == {
        "name": "run_command",
        "input": {"command": "true", "timeout_seconds": None, "cwd": None},
    }


def test_fake_sees_a_change_in_read_file_output() -> None:
    shown = "     1\tdef f():\n     2\t    return 2\n[showing lines 1-2 of 9; read on]"
    assert shown_text(shown) == "def f():\n    return 2"
    edit = Change(edits=(Edit("a.py", "return 1", "return 2"),))
    assert applied(edit, {"a.py": shown_text(shown)})
    assert not applied(edit, {"b.py": "return 2"})
    whole = Change(writes={"a.py": "def f():\n    return 2\n"})
    assert applied(whole, {"a.py": shown_text(shown)})
    assert not applied(whole, {"a.py": "def f():\n    return 1"})


def test_table_totals_and_unsolved_reasons() -> None:
    rows = [
        TaskResult("a", "A", "easy", True, "done", "", 2, 8, 1200, 300, 0.25, 3.0),
        TaskResult("b", "B", "hard", False, "stuck", "loop detected", 5, 20, 9000, 800, 1.5, 9.5),
    ]
    sums = totals(rows)
    assert sums["solved"] == 1 and sums["solve_rate"] == 0.5
    assert sums["tokens_in"] == 10200 and sums["cost_usd"] == 1.75
    text = table(rows, "anthropic: strong s, fast f")
    assert "1/2 (50%)" in text and "10,200" in text and "1.7500" in text
    assert "b (stuck): loop detected" in text
