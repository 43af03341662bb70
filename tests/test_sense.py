"""SENSE on a real repository and database: each claim group, the caps, loop status
(loop detection in depth: tests/test_loop_detection.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from soda.config import Config, LoopConfig
from soda.contracts import Claims, HumanInput, validate
from soda.loop.attempts import Attempt, loop_status
from soda.loop.sense import MAX_COMMITS, MAX_FILES, SenseInput, sense
from soda.store import open_db
from soda.store.db import now
from soda.trace import SqliteTracker
from tests.conftest import git, insert_run


def setup(repo: Path, tmp_path: Path, commits: int = 0, files_per_commit: int = 1):
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "soda/spec")
    for n in range(commits):
        for f in range(files_per_commit):
            (repo / f"f{n}_{f}.txt").write_text(f"{n}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"change {n}")
    git(repo, "checkout", "-q", "main")
    db = open_db(tmp_path / "soda.db")
    run_id = insert_run(db)
    inp = SenseInput(
        repo_path=repo,
        milestone_branch="soda/spec",
        base_commit=base,
        milestone="spec",
        run_id=run_id,
        iteration=1,
        iteration_in_run=1,
        config=Config(),
        db=db,
    )
    return inp, db


def test_claims_validate_against_the_contract(repo: Path, tmp_path: Path) -> None:
    inp, _ = setup(repo, tmp_path, commits=2)
    claims = sense(inp)
    assert isinstance(validate("claims", claims.model_dump(mode="json")), Claims)


def test_code_claims_are_capped(repo: Path, tmp_path: Path) -> None:
    inp, _ = setup(repo, tmp_path, commits=30, files_per_commit=5)
    code = sense(inp).code
    assert len(code.commits) == MAX_COMMITS
    assert code.commits_total == 30
    assert code.commits[0].subject == "change 29"  # newest first
    assert len(code.files_changed) == MAX_FILES
    assert code.head == git(repo, "rev-parse", "soda/spec")


def test_uncommitted_changes_in_the_checkout(repo: Path, tmp_path: Path) -> None:
    inp, _ = setup(repo, tmp_path)
    (repo / "README.md").write_text("edited\n")
    (repo / "new.txt").write_text("new\n")
    assert sorted(sense(inp).code.uncommitted) == ["README.md", "new.txt"]


def test_work_claims_group_tasks(repo: Path, tmp_path: Path) -> None:
    inp, db = setup(repo, tmp_path)
    tracker = SqliteTracker(db, "spec")
    root = tracker.create("Spec")
    tracker.create("open one", parent_id=root.id)
    blocked = tracker.create("blocked one", parent_id=root.id)
    tracker.block(blocked.id, "needs a key")
    done = tracker.create("done one", parent_id=root.id)
    tracker.close(done.id, "merged")
    tracker.comment(done.id, "executor", "all green")
    work = sense(inp).work
    assert work.root is not None and work.root.title == "Spec"
    assert [t.title for t in work.open] == ["open one"]  # the root is not listed as work
    assert [(t.title, t.reason) for t in work.blocked] == [("blocked one", "needs a key")]
    assert [t.title for t in work.recently_closed] == ["done one"]
    assert work.comments[0].body == "all green"


def test_human_claims_and_pause(repo: Path, tmp_path: Path) -> None:
    inp, db = setup(repo, tmp_path)

    def queue(item: HumanInput, status: str = "pending") -> None:
        with db.conn:
            db["human_inputs"].insert(
                {
                    "kind": item.kind,
                    "payload_json": json.dumps(item.model_dump(mode="json")),
                    "source": "test",
                    "status": status,
                    "received_at": now(),
                }
            )

    queue(HumanInput(kind="correction", text="use argparse"))
    queue(HumanInput(kind="pause"), status="applied")
    human = sense(inp).human
    assert [(h.kind, h.text) for h in human.pending] == [("correction", "correction: use argparse")]
    assert human.paused is True
    queue(HumanInput(kind="resume"))
    assert sense(inp).human.paused is False


def test_project_claims_recent_iterations_and_budget(repo: Path, tmp_path: Path) -> None:
    inp, db = setup(repo, tmp_path)
    with db.conn:
        for n in range(1, 4):
            db["iterations"].insert(
                {
                    "run_id": inp.run_id,
                    "number": n,
                    "started_at": now(),
                    "intent": "same",
                    "outcome": "gate_failed",
                }
            )
        db["agent_calls"].insert(
            {
                "run_id": inp.run_id,
                "agent": "x",
                "provider": "p",
                "model": "m",
                "turn": 1,
                "started_at": now(),
                "latency_ms": 1,
                "cost_usd": 0.25,
            }
        )
        db["learnings"].insert(
            {"text": "tests live in tests/", "source_agent": "v", "active": 1, "created_at": now()}
        )
    later = SenseInput(**{**inp.__dict__, "iteration": 4})
    project = sense(later).project
    assert [r.number for r in project.recent] == [3, 2, 1]
    assert project.loop.detected is False  # a first hit warns ORIENT
    assert project.loop.warning is not None
    assert project.loop.warning.startswith('you have tried "same" 3 times')
    assert project.budget.cost_usd == pytest.approx(0.25)
    assert project.learnings == ["L1: tests live in tests/"]


def attempt(n: int, intent: str, outcome: str) -> Attempt:
    return Attempt(number=n, intent=intent, outcome=outcome)


@pytest.mark.parametrize(
    ("recent", "warned"),
    [
        (
            [
                attempt(3, "Add X", "gate_failed"),
                attempt(2, "add  x", "gate_failed"),
                attempt(1, "ADD X.", "gate_failed"),
            ],
            True,
        ),
        (
            [
                attempt(3, "Add X", "gate_failed"),
                attempt(2, "Add X", "merged"),
                attempt(1, "Add X", "gate_failed"),
            ],
            False,
        ),
        (
            [
                attempt(3, "Add X", "merged"),
                attempt(2, "Add X", "merged"),
                attempt(1, "Add X", "merged"),
            ],
            False,
        ),
        (
            [
                attempt(3, "Add X", "gate_failed"),
                attempt(2, "Add Y", "gate_failed"),
                attempt(1, "Add Z", "gate_failed"),
            ],
            False,
        ),
        (
            [
                attempt(4, "a", "conflict"),
                attempt(3, "b", "conflict"),
                attempt(2, "a", "conflict"),
                attempt(1, "a", "conflict"),
            ],
            False,
        ),  # window 3
    ],
)
def test_loop_status(recent: list[Attempt], warned: bool) -> None:
    status = loop_status(recent, LoopConfig(loop_window=3, loop_threshold=3, warned_repeats=0))
    assert status.detected is warned  # no warned repeats: the first hit is a loop
    if warned:
        assert "3 times" in status.detail
