"""Plan-only: `soda plan` and `soda run --plan-only` run SENSE, ORIENT and DECIDE,
print the plan as a DAG, record a `plan_only` iteration and change nothing in
the repository (refs, worktrees, working tree, `git status`), in Trace or in the
human-input queue."""

from __future__ import annotations

import json
from pathlib import Path

from soda.config import load
from soda.contracts import HumanInput
from soda.human.write import write_input
from soda.loop.plan_only import preview, render_preview
from soda.repo.milestone import milestone_branch
from soda.store.db import open_db
from tests.conftest import git, soda
from tests.plan_fakes import fake_model, new_project, plan, task

DAG = plan(
    task("a", title="Add divide"),
    task("b", "a", title="Tests for divide"),
    task("c", title="Docs", risk="high"),
)


def repository_state(root: Path) -> dict[str, str]:
    """Everything a plan-only run must leave as it was."""
    return {
        "refs": git(root, "for-each-ref", "--format=%(refname) %(objectname)"),
        "head": git(root, "symbolic-ref", "HEAD") + git(root, "rev-parse", "HEAD"),
        "status": git(root, "status", "--porcelain", "--untracked-files=all"),
        "worktrees": git(root, "worktree", "list", "--porcelain"),
        "tree": git(root, "ls-files", "-s") + git(root, "diff"),
        "spec": (root / "specs" / "SPEC.md").read_text(),
    }


def test_plan_only_prints_the_dag_records_it_and_changes_nothing(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    write_input(root / "state", HumanInput(kind="spec_change", text="# New spec", mode="replace"))
    before = repository_state(root)
    assert "refs/heads/soda/" not in before["refs"]  # no milestone branch yet
    lines: list[str] = []
    config = load(root / "soda.toml")
    model = fake_model(DAG)
    found = preview(config, lines.append, model)
    printed = render_preview(found, config)
    assert printed[1] == "plan for iteration 1: Add divide and its tests"
    assert "  batch 1: [a] Add divide (risk low)" in printed
    assert "           [c] Docs (risk high)" in printed
    assert "  batch 2: [b] Tests for divide (risk low) <- a" in printed
    assert "  risk: high (needs `soda approve`; threshold high)" in printed
    assert printed[-2].startswith("decide: CONTINUE")
    assert repository_state(root) == before  # refs, worktrees, tree, status, spec

    db = open_db(config.db_path)
    (row,) = db.execute("SELECT number, outcome, decision, intent, orient_json FROM iterations")
    assert row[:4] == (1, "plan_only", "CONTINUE", "Add divide and its tests")
    assert [t["id"] for t in json.loads(row[4])["iteration_plan"]["tasks"]] == ["a", "b", "c"]
    agents = {r[0] for r in db.execute("SELECT agent FROM agent_calls")}
    assert agents == {"verifier", "assessor", "planner"}  # no executor
    # The spec change was not taken in: no human input consumed, no Trace task made.
    assert db.execute("SELECT count(*) FROM human_inputs").fetchone()[0] == 0
    assert [p.name for p in (root / "state" / "inbox").iterdir() if p.is_file()]
    titles = [r[0] for r in db.execute("SELECT title FROM tasks")]
    assert "Add divide" not in titles
    assert db.execute("SELECT status FROM runs").fetchone()[0] == "plan_only"


def test_plan_only_keeps_an_existing_milestone_branch(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    config = load(root / "soda.toml")
    git(root, "branch", milestone_branch(config), "main")
    before = repository_state(root)
    preview(config, lambda line: None, fake_model(DAG))
    assert repository_state(root) == before
    assert f"refs/heads/{milestone_branch(config)} " in before["refs"]


def test_soda_plan_and_run_plan_only_through_the_cli(tmp_path: Path) -> None:
    root = new_project(tmp_path)  # the scripted demo: its first plan has one task
    before = repository_state(root)
    for command in (["plan"], ["run", "--plan-only"]):
        done = soda(*command, cwd=root)
        assert done.returncode == 0, done.stderr
        assert "batch 1: [a] Implement calc.subtract and calc.divide (risk low)" in done.stdout
        assert "plan only: nothing was changed in the repository" in done.stdout
        assert repository_state(root) == before
    outcomes = open_db(root / "state" / "soda.db").execute("SELECT outcome FROM iterations")
    assert [r[0] for r in outcomes] == ["plan_only", "plan_only"]
