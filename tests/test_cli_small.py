"""The small things a person meets first, through the real CLI in a subprocess on
real git repositories: init on any branch name, -h, approve/reject checks,
history --limit, run's endings and --json, show's agent text, the demo's output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from soda.cli.demo import SCRIPT_PATH, prepare
from tests.conftest import git, soda
from tests.scripts import submit

ROOT = Path(__file__).resolve().parent.parent
DEMO_SCRIPT = json.loads((ROOT / "soda" / "demo" / "script.json").read_text())["responses"]


def scripted_project(path: Path, responses: list[dict[str, Any]] = DEMO_SCRIPT) -> Path:
    """The demo's sample project (scripted model) with its own script."""
    prepare(path)
    python = json.dumps(sys.executable)[1:-1]
    (path / SCRIPT_PATH).write_text(
        json.dumps({"responses": responses}).replace("{python}", python)
    )
    return path


def new_repo(path: Path, branch: str, commit: bool = True) -> Path:
    path.mkdir()
    git(path, "init", "-q", "-b", branch)
    if commit:
        (path / "README.md").write_text("# sample\n")
        git(path, "add", "README.md")
        git(path, "commit", "-q", "-m", "initial")
    return path


def base_branch(repo: Path) -> str:
    lines = [
        line
        for line in (repo / "soda.toml").read_text().splitlines()
        if line.startswith("base_branch")
    ]
    assert len(lines) == 1
    return json.loads(lines[0].split("=", 1)[1])


# soda init: the base branch is the repository's, not always "main"


@pytest.mark.parametrize("branch", ["master", "trunk"])
def test_init_writes_the_branch_head_is_on(tmp_path: Path, branch: str) -> None:
    repo = new_repo(tmp_path / "repo", branch)
    result = soda("init", cwd=repo)
    assert result.returncode == 0, result.stderr
    assert base_branch(repo) == branch
    assert f"base_branch = '{branch}' (the branch HEAD is on)" in result.stdout
    # ... and soda can start from it (it refused before: no branch main).
    doctor = soda("history", cwd=repo)
    assert doctor.returncode == 0, doctor.stderr


def test_init_with_a_detached_head_picks_an_existing_branch(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "repo", "master")
    git(repo, "checkout", "-q", "-b", "feature")
    git(repo, "commit", "-q", "--allow-empty", "-m", "feature work")
    git(repo, "checkout", "-q", "--detach")
    assert soda("init", cwd=repo).returncode == 0
    assert base_branch(repo) == "master"


def test_init_in_a_repository_without_commits_uses_the_unborn_branch(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "repo", "trunk", commit=False)
    assert soda("init", cwd=repo).returncode == 0
    assert base_branch(repo) == "trunk"


def test_init_in_a_clone_on_a_detached_head_uses_the_remote_default(tmp_path: Path) -> None:
    origin = new_repo(tmp_path / "origin", "develop")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    git(clone, "branch", "-q", "other")
    git(clone, "checkout", "-q", "--detach")
    assert soda("init", cwd=clone).returncode == 0
    assert base_branch(clone) == "develop"


# -h everywhere


@pytest.mark.parametrize("args", [["-h"], ["history", "-h"], ["approve", "-h"], ["run", "-h"]])
def test_dash_h_prints_help(tmp_path: Path, args: list[str]) -> None:
    result = soda(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    usage = result.stdout.splitlines()[0]
    assert usage.startswith("Usage: ") and "soda" in usage
    if len(args) > 1:
        assert f"soda {args[0]} " in usage
    assert "-h, --help" in result.stdout


# One demo, run from the installed script with PATH not leading to it


def _demo_command() -> tuple[list[str], str]:
    """argv for the venv's `soda` script, and how the demo should name it."""
    script = Path(sys.executable).parent / "soda"
    if script.is_file():
        return [str(script)], str(script.absolute())
    return [sys.executable, "-m", "soda"], f"{sys.executable} -m soda"


@pytest.fixture(scope="module")
def demo(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str], str]:
    base = tmp_path_factory.mktemp("demo")
    target = base / "demo"
    argv, expected = _demo_command()
    env = {**os.environ, "PATH": "/usr/bin:/bin"}  # the venv's bin is not on it
    result = subprocess.run(
        [*argv, "demo", "--dir", str(target)],
        cwd=base,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return target, result, expected


def test_demo_suggests_commands_that_run(demo: tuple[Path, Any, str]) -> None:
    target, result, expected = demo
    assert f"  {expected} history" in result.stdout.splitlines()
    assert "  soda history" not in result.stdout.splitlines()
    suggested = subprocess.run(
        [*expected.split(" "), "history"],  # the paths in tests have no spaces
        cwd=target,
        env={**os.environ, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert suggested.returncode == 0, suggested.stderr
    assert "DONE" in suggested.stdout


def test_demo_sample_ignores_bytecode(demo: tuple[Path, Any, str]) -> None:
    target, _, _ = demo
    assert (ROOT / "soda" / "demo" / "sample" / ".gitignore").is_file()
    ignore = (target / ".gitignore").read_text()
    assert "__pycache__/" in ignore
    tracked = git(target, "ls-tree", "-r", "--name-only", "soda/spec").splitlines()
    assert ".gitignore" in tracked
    assert not [name for name in tracked if "__pycache__" in name or name.endswith(".pyc")]


def test_demo_says_why_tokens_and_cost_are_zero(demo: tuple[Path, Any, str]) -> None:
    _, result, _ = demo
    assert "the scripted model makes no paid calls" in result.stdout
    assert "agent_calls" in result.stdout


def test_demo_prints_the_branch_the_merge_and_one_ending(demo: tuple[Path, Any, str]) -> None:
    target, result, _ = demo
    lines = result.stdout.splitlines()
    assert "milestone branch soda/spec (from main, tip " in result.stdout
    merged = git(target, "log", "-1", "--format=%H", "--merges", "soda/spec")
    assert f"merged: {merged} onto soda/spec (iteration 1)" in lines
    endings = [line for line in lines if line.startswith("DONE")]
    assert endings == [
        f"DONE: the spec is met (iteration 2); merged {merged[:10]} on soda/spec (exit 0)"
    ]


def test_show_prints_what_the_agents_said(demo: tuple[Path, Any, str]) -> None:
    target, _, _ = demo
    result = soda("show", "1", cwd=target)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    # Text, tool calls and the answers' summaries from agent_calls.response_json.
    assert "      says: Checking what calc.py provides today." in out
    assert "      calls: read_file(calc.py), search_text(def (subtract|divide))" in out
    assert "      answer: calc.py has add() only." in out
    assert "      answer: Add subtract() and divide() to calc.py" in out  # the plan's intent
    # The plan's and the task's steps, from the events.
    steps = out.split("\nSTEPS\n", 1)[1].split("\n\n", 1)[0].splitlines()
    kinds = [line.split()[1] for line in steps]
    assert kinds == ["plan.started", "act.task.start", "act.task.completed", "plan.completed"]
    assert "key=a" in steps[2] and "status=merged" in steps[2]


def test_json_of_history_show_tasks_status_and_cost(demo: tuple[Path, Any, str]) -> None:
    """--json: one JSON object on stdout, with the keys the README promises."""
    target, _, _ = demo

    def as_json(*args: str) -> Any:
        result = soda(*args, "--json", cwd=target)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    merged = git(target, "log", "-1", "--format=%H", "--merges", "soda/spec")
    iterations = as_json("history")["iterations"]
    assert [row["number"] for row in iterations] == [1, 2]
    assert set(iterations[0]) == {
        "number",
        "intent",
        "decision",
        "outcome",
        "merged_commit",
        "duration_s",
        "tokens",
        "cost_usd",
        "phase",
    }
    assert iterations[0]["merged_commit"] == merged and iterations[1]["decision"] == "DONE"
    assert [row["number"] for row in as_json("history", "--limit", "1")["iterations"]] == [2]

    one = as_json("show", "1")
    assert one["number"] == 1 and one["merged_commit"] == merged
    assert one["orient"]["iteration_plan"]["intent"].startswith("Add subtract() and divide()")
    assert one["act"]["outcome"] == "merged" and one["claims"]["code"]["branch"] == "soda/spec"
    agents = [call["agent"] for call in one["agent_calls"]]
    assert agents[:2] == ["verifier", "verifier"] and agents[-1] == "executor"
    assert "says: Checking what calc.py provides today." in one["agent_calls"][0]["text"]
    assert one["halts"] == [] and one["human_inputs"] == []
    assert one["steps"][0]["kind"] == "plan.started"
    missing = soda("show", "99", "--json", cwd=target)
    assert missing.returncode == 2 and missing.stdout == ""

    tasks = as_json("tasks")
    assert tasks["milestone"] == "spec" and tasks["tasks"]
    assert {"id", "parent_id", "title", "status", "risk"} <= set(tasks["tasks"][0])
    assert all(task["status"] == "closed" for task in tasks["tasks"])

    status = as_json("status")
    assert status["running"] is False and status["last_decision"] == "DONE"
    cost = as_json("cost")
    assert cost["total"]["calls"] == len(one["agent_calls"]) + len(
        as_json("show", "2")["agent_calls"]
    )


def test_approve_and_reject_refuse_iterations_that_wait_for_nothing(
    demo: tuple[Path, Any, str],
) -> None:
    target, _, _ = demo
    inbox = target / "state" / "inbox"
    before = sorted(inbox.iterdir()) if inbox.is_dir() else []
    for args in (["approve", "999"], ["approve", "0"], ["approve", "1"], ["reject", "2"]):
        result = soda(*args, cwd=target)
        assert result.returncode == 2, (args, result.stdout)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("soda: "), (args, lines)
    assert (
        "no iteration 999 to approve: the latest is 2" in soda("approve", "999", cwd=target).stderr
    )
    assert "iteration 1 is not waiting for approval: it ended (merged)" in (
        soda("approve", "1", cwd=target).stderr
    )
    assert (sorted(inbox.iterdir()) if inbox.is_dir() else []) == before  # nothing queued
    # The next iteration may be answered before the daemon starts it.
    ahead = soda("approve", "3", cwd=target)
    assert ahead.returncode == 0, ahead.stderr
    assert "iteration 3 has not started" in ahead.stdout


def test_approve_accepts_an_iteration_that_is_still_running(tmp_path: Path) -> None:
    from soda.store import open_db
    from tests.conftest import insert_run

    root = scripted_project(tmp_path / "project")
    db = open_db(root / "state" / "soda.db")
    run_id = insert_run(db)
    with db.conn:
        iteration_id = (
            db["iterations"]
            .insert(
                {
                    "run_id": run_id,
                    "number": 1,
                    "started_at": "2026-01-01T00:00:00Z",
                    "phase": "act",
                }
            )
            .last_pk
        )
        db["events"].insert(
            {
                "ts": "2026-01-01T00:00:01Z",
                "run_id": run_id,
                "iteration_id": iteration_id,
                "kind": "approval.waiting",
                "data_json": '{"iteration": 1, "risk": "high"}',
            }
        )
    waiting = soda("reject", "1", "--reason", "too risky", cwd=root)
    assert waiting.returncode == 0, waiting.stderr
    assert waiting.stdout.splitlines()[0].startswith("queued reject: plan of iteration 1")
    assert len(waiting.stdout.splitlines()) == 1
    assert soda("approve", "2", cwd=root).returncode == 0
    assert soda("approve", "3", cwd=root).returncode == 2


# history --limit


def test_history_limit_must_be_at_least_one(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "repo", "main")
    assert soda("init", cwd=repo).returncode == 0
    zero = soda("history", "--limit", "0", cwd=repo)
    assert zero.returncode == 2
    assert "Invalid value for '--limit'" in zero.stderr and "1" in zero.stderr
    assert "no iterations yet" not in zero.stdout
    one = soda("history", "--limit", "1", cwd=repo)
    assert one.returncode == 0 and "no iterations yet" in one.stdout


# soda run: what happened, in the last line and in --json


def test_run_once_json_says_more_to_do_then_done(tmp_path: Path) -> None:
    root = scripted_project(tmp_path / "project")
    first = soda("run", "--once", "--json", cwd=root)
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)  # stdout is the JSON object alone
    merged = git(root, "rev-parse", "soda/spec")
    assert summary == {
        "ending": "continue",
        "exit_code": 0,
        "iteration": 1,
        "reason": summary["reason"],
        "milestone_branch": "soda/spec",
        "merged_commit": merged,
    }
    assert "calc.py" in summary["reason"]
    progress = first.stderr.splitlines()
    assert progress[0].startswith("milestone branch soda/spec (from main, tip ")
    assert f"merged: {merged} onto soda/spec (iteration 1)" in progress
    assert progress[-1].startswith("CONTINUE: iteration 1 finished and the spec is not met yet")
    assert "more to do" in progress[-1] and progress[-1].endswith("(exit 0)")

    # A new process replays its script from the start: give it the second iteration's.
    script = json.dumps({"responses": DEMO_SCRIPT[10:]}).replace("{python}", sys.executable)
    (root / SCRIPT_PATH).write_text(script)
    assert DEMO_SCRIPT[10]["agent"] == "verifier"
    second = soda("run", "--once", cwd=root)
    assert second.returncode == 0, second.stderr
    last = second.stdout.splitlines()[-1]
    assert last == (
        "DONE: the spec is met (iteration 2); nothing merged on soda/spec in this run (exit 0)"
    )


def test_halt_is_said_once(tmp_path: Path) -> None:
    bad = submit(
        "verifier",
        {"checks": [], "task_updates": [], "learnings": [], "summary": 42, "learning_verdicts": []},
    )
    root = scripted_project(tmp_path / "project", [bad])
    result = soda("run", "--once", "--json", cwd=root)
    assert result.returncode == 4, result.stderr
    summary = json.loads(result.stdout)
    assert summary["ending"] == "halt" and summary["merged_commit"] is None
    mentions = [line for line in result.stderr.splitlines() if summary["reason"] in line]
    assert len(mentions) == 1, result.stderr
    assert result.stderr.splitlines()[-1].startswith("HALT: something structural is wrong")
