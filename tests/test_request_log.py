"""`model.log_requests`: what each model call was sent and answered, kept per
iteration in state/requests/ and printed by `soda show N --requests` (a real
project, a real iteration, the real CLI in a subprocess; the model is the
behavioural fake)."""

from __future__ import annotations

import json
from pathlib import Path

from soda.agent.request_log import log_path, prune
from soda.loop.run import run_iteration
from tests.conftest import soda
from tests.plan_fakes import fake_model, new_project, open_session, plan, set_key, task


def test_requests_are_kept_per_iteration_and_shown(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    set_key(root, "log_requests", "true")
    session = open_session(root, fake_model(plan(task("a"))))
    result = run_iteration(session, lambda line: None)
    session.finish_run("done", "test")
    path = log_path(root / "state", result.number)
    calls = [json.loads(line) for line in path.read_text().splitlines()]
    agents = [call["agent"] for call in calls]
    assert agents[:3] == ["verifier", "assessor", "planner"] and "executor" in agents
    first = calls[0]
    assert first["turn"] == 1 and first["system"] and "read_file" in first["tools"]
    assert first["response"]["tool_calls"][0]["name"] == "submit"
    later = next(call for call in calls if call["turn"] > 1)
    assert "system" not in later and len(later["messages"]) == 1  # only what is new
    assert later["messages"][0]["tool_results"]  # the results of the previous turn's calls

    shown = soda("show", str(result.number), "--requests", cwd=root)
    assert shown.returncode == 0, shown.stderr
    assert "── verifier · turn 1" in shown.stdout and "-> submit" in shown.stdout
    as_json = soda("show", str(result.number), "--requests", "--json", cwd=root)
    assert [json.loads(line)["agent"] for line in as_json.stdout.splitlines()] == agents


def test_without_the_setting_nothing_is_kept_and_show_says_how(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    session = open_session(root, fake_model(None))
    result = run_iteration(session, lambda line: None)
    session.finish_run("done", "test")
    assert not (root / "state" / "requests").exists()
    shown = soda("show", str(result.number), "--requests", cwd=root)
    assert shown.returncode == 2
    assert shown.stderr.strip() == (
        f"soda: no requests kept for iteration {result.number}:"
        " set model.log_requests = true in soda.toml to keep them"
    )


def test_only_the_newest_iterations_are_kept(tmp_path: Path) -> None:
    for number in (1, 2, 3, 10):
        (tmp_path / f"{number}.jsonl").write_text("{}\n")
    prune(tmp_path, 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["10.jsonl", "3.jsonl"]
