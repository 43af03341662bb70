"""Faults of a coding CLI executor, each ending the task cleanly within its limit
with nothing left running: a stream that stops without ending, a CLI that hangs
after its result, an error reported with exit code 0, an API that answers 529,
and a budget spent in the middle of the task."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from soda.agent.backends.pins import installed_binary
from soda.agent.executors import PINS
from tests.cli_executors import (
    cli_project,
    outcome,
    require_cli,
    run_once,
    running,
    scripted,
)
from tests.conftest import git, wait_for
from tests.fakestream import Seen, Step, StreamAPI, stall_after_start, status

NOTE = "mkdir -p notes && printf 'Task a\\n' > notes/a.txt"


def task_row(session: object) -> dict[str, object]:
    (row,) = list(session.db["iterations"].rows)  # type: ignore[attr-defined]
    (task,) = json.loads(row["act_json"])["tasks"]
    return dict(task)


def ended(session: object) -> dict[str, object]:
    rows = session.db["events"].rows_where("kind = 'executor.end'")  # type: ignore[attr-defined]
    (row,) = list(rows)
    return dict(json.loads(row["data_json"]))


def nothing_left(tmp_path: Path, backend: str) -> None:
    binary = str(installed_binary(PINS[backend]))
    wait_for(lambda: not running(tmp_path, binary), 10, f"{backend} to be gone")
    wait_for(lambda: not running(tmp_path, "launcher.py"), 10, "the launcher to be gone")


@pytest.mark.parametrize("backend", ["claude-code", "codex"])
def test_a_stream_that_stops_without_ending_is_killed_at_the_idle_limit(
    tmp_path: Path, backend: str
) -> None:
    api = StreamAPI(lambda seen: stall_after_start()).start()
    try:
        root = cli_project(tmp_path, backend, api, idle_timeout=2)
        started = time.monotonic()
        session = run_once(root)
        assert time.monotonic() - started < 30
        assert outcome(session) == "nothing_completed"
        assert ended(session)["killed"] == "idle: no event for 2 s"
        task = task_row(session)
        assert task["status"] == "gave_up" and "idle" in str(task["reason"])
        nothing_left(tmp_path, backend)
        session.finish_run("done", "test")
    finally:
        api.close()


def wrapper(tmp_path: Path, backend: str, after: str) -> str:
    """The real CLI, then `after` (a hang, a false exit code): its stdout stays ours."""
    real = require_cli(backend)
    script = tmp_path / "bin" / "cli-wrapper.sh"  # alone in its directory: bound read-only
    script.parent.mkdir()
    script.write_text(
        f'#!/bin/sh\ncase "$1" in --version) exec "{real}" "$@";; esac\n"{real}" "$@"\n{after}\n'
    )
    script.chmod(0o755)
    return str(script)


def test_a_cli_that_hangs_after_its_result_is_ended_after_the_grace(tmp_path: Path) -> None:
    api = StreamAPI(scripted(NOTE)).start()
    try:
        command = wrapper(tmp_path, "claude-code", "sleep 2718")
        root = cli_project(tmp_path, "claude-code", api, command=command, result_grace=1)
        started = time.monotonic()
        session = run_once(root)
        assert time.monotonic() - started < 30
        assert outcome(session) == "merged"  # it had answered: the work counts
        assert "after its final result" in str(ended(session)["killed"])
        assert git(root, "show", "soda/spec:notes/a.txt") == "Task a"
        wait_for(lambda: not running(tmp_path, "sleep 2718"), 10, "the hung wrapper to die")
        session.finish_run("done", "test")
    finally:
        api.close()


def test_an_error_with_exit_code_0_is_a_failed_attempt(tmp_path: Path) -> None:
    def respond(seen: Seen) -> Step:
        return status(400)

    api = StreamAPI(respond).start()
    try:
        command = wrapper(tmp_path, "claude-code", "exit 0")
        root = cli_project(tmp_path, "claude-code", api, command=command)
        session = run_once(root)
        assert ended(session)["exit_code"] == 0
        assert outcome(session) == "nothing_completed"
        task = task_row(session)
        assert task["status"] == "gave_up"
        assert "claude-code ended with an error" in str(task["reason"])
        nothing_left(tmp_path, "claude-code")
        session.finish_run("done", "test")
    finally:
        api.close()


def test_an_api_that_answers_529_ends_the_task_as_transient(tmp_path: Path) -> None:
    api = StreamAPI(lambda seen: status(529)).start()
    try:
        root = cli_project(tmp_path, "claude-code", api, api_failures=2)
        started = time.monotonic()
        session = run_once(root)
        assert time.monotonic() - started < 60
        assert outcome(session) == "transient"
        assert len(api.model_requests()) >= 2
        assert "failed 2 times in a row" in str(ended(session)["killed"])
        nothing_left(tmp_path, "claude-code")
        session.finish_run("done", "test")
    finally:
        api.close()


def test_a_spent_budget_refuses_the_next_call_and_ends_the_task_budget(tmp_path: Path) -> None:
    api = StreamAPI(scripted(NOTE, "true")).start()
    try:
        settings = {"max_cost_usd = 10.0": "max_cost_usd = 0.000001"}
        root = cli_project(tmp_path, "claude-code", api, settings, model="claude-sonnet-4-6")
        session = run_once(root)
        assert outcome(session) == "budget"
        assert len(api.model_requests()) == 1  # the call after the spending one never left
        refused = [
            json.loads(r["data_json"])
            for r in session.db["events"].rows_where("kind = 'executor.refused'")
        ]
        assert refused and refused[0]["why"] == "budget spent"
        rows = list(session.db["agent_calls"].rows_where("agent = 'executor:claude-code'"))
        assert len(rows) == 1 and rows[0]["cost_usd"] > 0.000001
        nothing_left(tmp_path, "claude-code")
        session.finish_run("done", "test")
    finally:
        api.close()
