"""Loop detection by similarity, on real iteration rows: a model that rephrases the
same failing attempt is warned first (ORIENT reads it in the claims, DECIDE goes
on), then stopped as STUCK after the warned repeats; other work does not count."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from soda.config import Config, LoopConfig, load
from soda.contracts import Claims, IterationPlan, LoopStatus, Orientation, PlanTask, validate
from soda.errors import ConfigError
from soda.loop.attempts import intent_words
from soda.loop.decide import Budget, Control, Kind, LoopState, decide
from soda.loop.sense import SenseInput, project_claims, sense
from soda.store import open_db
from soda.store.db import Database, dumps, now
from tests.conftest import git, insert_run

DIVIDE_TEST = "tests/test_calc.py::test_divide"
REPHRASED = [
    "Add divide()",
    "implement the divide function",
    "add a divide function to calc",
    "Implement divide() in calc",
]


class History:
    """Iteration rows of one run, written as the loop writes them."""

    def __init__(self, tmp_path: Path, **loop: Any) -> None:
        self.db: Database = open_db(tmp_path / "soda.db")
        self.run_id = insert_run(self.db)
        self.config = Config(loop=LoopConfig(**loop))
        self.number = 0

    def add(
        self,
        intent: str | None,
        outcome: str | None,
        tasks: list[int] | None = None,
        failing: list[str] | None = None,
        act: bool = True,
        run_id: int | None = None,
    ) -> None:
        self.number += 1
        plan_tasks = [{"id": f"k{t}", "task_id": t, "title": "t"} for t in tasks or []]
        row: dict[str, Any] = {
            "run_id": run_id or self.run_id,
            "number": self.number,
            "started_at": now(),
            "intent": intent,
            "decision": "CONTINUE",
            "outcome": outcome,
            "orient_json": dumps({"iteration_plan": {"intent": intent, "tasks": plan_tasks}}),
        }
        if act:
            row["act_json"] = dumps(
                {
                    "outcome": outcome,
                    "tasks": [
                        {"key": f"k{t}", "task_id": t, "status": "completed"} for t in tasks or []
                    ],
                    "failing": {name: "AssertionError: assert None == 2" for name in failing or []},
                }
            )
        with self.db.conn:
            self.db["iterations"].insert(row)

    def inp(self, repo: Path | None = None) -> SenseInput:
        return SenseInput(
            repo_path=repo or Path("."),
            milestone_branch="soda/spec",
            base_commit="",
            milestone="spec",
            run_id=self.run_id,
            iteration=self.number + 1,
            iteration_in_run=self.number + 1,
            config=self.config,
            db=self.db,
        )

    def loop(self) -> LoopStatus:
        """The loop status SENSE gives the next iteration."""
        return project_claims(self.inp()).loop


def rephrasing(history: History, count: int, first_task: int = 10) -> None:
    """A model that tries `count` times to add divide(), in other words and on a
    new Trace task each time, and fails the same test every time."""
    for n in range(count):
        history.add(REPHRASED[n % len(REPHRASED)], "gate_failed", [first_task + n], [DIVIDE_TEST])


def decide_next(loop: LoopStatus) -> Kind:
    plan = IterationPlan(
        intent="add divide again",
        approach="tdd",
        tasks=[
            PlanTask(
                id="a",
                task_id=None,
                title="divide",
                description="d",
                depends_on=[],
                risk="low",
                tool_hints=[],
            )
        ],
    )
    orientation = Orientation(
        spec_satisfied=False,
        actionable_work_exists=True,
        confidence="high",
        summary="divide missing",
        task_updates=[],
        new_tasks=[],
        gaps=[],
        iteration_plan=plan,
        stuck_reason=None,
        learnings=[],
        learning_verdicts=[],
    )
    budget = Budget(0.0, 10.0, 0, 1_000_000)
    return decide(orientation, LoopState(1, 20, loop), budget, Control()).kind


def test_rephrasings_normalize_alike() -> None:
    assert intent_words("Add divide()") == intent_words("implement the divide function")
    assert intent_words("add a divide function to calc") == {"add", "divid", "calc"}
    assert intent_words("Fixes safeDivide in calc.py") == {"fix", "saf", "divid", "calc"}


def test_a_rephrasing_model_is_warned_then_stuck(tmp_path: Path) -> None:
    history = History(tmp_path)  # defaults: window 5, threshold 3, 1 warned repeat
    rephrasing(history, 2)
    assert history.loop() == LoopStatus(detected=False, detail="no repetition", warning=None)

    history.add(REPHRASED[2], "gate_failed", [12], [DIVIDE_TEST])
    warned = history.loop()
    assert warned.detected is False
    assert warned.warning == (
        'you have tried "add a divide function to calc" 3 times (iterations 3, 2, 1); '
        f"it ended gate_failed (failing: {DIVIDE_TEST}). One more similar attempt stops "
        "the run as STUCK: change the approach (a smaller step, another task, a different "
        "fix), or set actionable_work_exists false and say what a person must do."
    )
    assert decide_next(warned) is Kind.CONTINUE

    history.add(REPHRASED[3], "gate_failed", [13], [DIVIDE_TEST])
    stuck = history.loop()
    assert stuck.detected is True
    assert stuck.detail.startswith('tried "Implement divide() in calc" 4 times')
    assert stuck.detail.endswith("1 after a warning")
    assert decide_next(stuck) is Kind.STUCK


def test_the_warning_reaches_orient_in_the_claims(repo: Path, tmp_path: Path) -> None:
    git(repo, "branch", "soda/spec")
    history = History(tmp_path)
    rephrasing(history, 3)
    inp = history.inp(repo)
    inp = SenseInput(**{**inp.__dict__, "base_commit": git(repo, "rev-parse", "HEAD")})
    claims = sense(inp)
    dumped = claims.model_dump(mode="json")
    assert isinstance(validate("claims", dumped), Claims)
    assert dumped["project"]["loop"]["warning"].startswith('you have tried "add a divide')
    assert "you have tried" in json.dumps(dumped)  # what the agents are sent


@pytest.mark.parametrize(
    ("name", "rows"),
    [
        (
            "different tasks, no failing tests",
            [(i, "no_changes", [10 + n], []) for n, i in enumerate(REPHRASED[:3])],
        ),
        (
            "different tasks, different failing tests",
            [(i, "gate_failed", [10 + n], [f"t::test_{n}"]) for n, i in enumerate(REPHRASED[:3])],
        ),
        (
            "a merge in between",
            [
                (REPHRASED[0], "gate_failed", [10], [DIVIDE_TEST]),
                (REPHRASED[1], "merged", [11], []),
                (REPHRASED[2], "gate_failed", [12], [DIVIDE_TEST]),
            ],
        ),
        ("all merged", [(i, "merged", [10], []) for i in REPHRASED[:3]]),
        (
            "different failure classes",
            [
                (REPHRASED[0], "gate_failed", [10], [DIVIDE_TEST]),
                (REPHRASED[1], "no_changes", [10], []),
                (REPHRASED[2], "gate_failed", [10], [DIVIDE_TEST]),
            ],
        ),
        (
            "different intents",
            [
                ("Add divide()", "gate_failed", [10], [DIVIDE_TEST]),
                ("Add multiply()", "gate_failed", [10], [DIVIDE_TEST]),
                ("Fix the divide-by-zero message", "gate_failed", [10], [DIVIDE_TEST]),
            ],
        ),
        (
            "not the plan's doing",
            [
                (i, o, [10], [])
                for i, o in zip(REPHRASED, ["transient", "interrupted", "halted"], strict=False)
            ],
        ),
    ],
)
def test_what_does_not_count(tmp_path: Path, name: str, rows: list[tuple]) -> None:
    history = History(tmp_path)
    for intent, outcome, tasks, failing in rows:
        history.add(intent, outcome, tasks, failing)
    assert history.loop().warning is None, name


def test_same_task_without_test_results_counts(tmp_path: Path) -> None:
    """An executor that gives up on the same task (turn limit) over and over."""
    history = History(tmp_path)
    for intent in REPHRASED[:3]:
        history.add(intent, "nothing_completed", [7])
    warning = history.loop().warning
    assert warning is not None and "it ended nothing_completed." in warning


def test_tasks_come_from_the_plan_when_act_did_not_record_them(tmp_path: Path) -> None:
    history = History(tmp_path)
    history.add(REPHRASED[0], "rejected", [7], act=False)
    history.add(REPHRASED[1], "rejected", [8], act=False)
    history.add(REPHRASED[2], "rejected", [7], act=False)
    assert history.loop().warning is None  # task 8 is other work
    history.add(REPHRASED[3], "rejected", [7], act=False)
    assert history.loop().warning is not None


def test_only_the_window_and_this_run_count(tmp_path: Path) -> None:
    history = History(tmp_path)
    other_run = insert_run(history.db)
    rephrasing(history, 2)
    history.add(REPHRASED[2], "gate_failed", [12], [DIVIDE_TEST], run_id=other_run)
    assert history.loop().warning is None
    for intent in ("Add multiply()", "Add power()", "Add modulo()"):
        history.add(intent, "merged", [20], [])
    history.add(REPHRASED[3], "gate_failed", [13], [DIVIDE_TEST])
    assert history.loop().warning is None  # iterations 1 and 2 left the window of 5


def test_unreadable_records_do_not_break_sense(tmp_path: Path) -> None:
    history = History(tmp_path)
    rephrasing(history, 2)
    history.add(REPHRASED[2], "gate_failed", [12], [DIVIDE_TEST])
    with history.db.conn:
        history.db.execute("UPDATE iterations SET act_json = '{not json', orient_json = '[]'")
    assert history.loop().warning is not None  # no evidence: intent and outcome decide


def test_thresholds_are_configurable(tmp_path: Path) -> None:
    strict = History(tmp_path / "strict", intent_similarity=1.0)
    rephrasing(strict, 3)
    assert strict.loop().warning is None  # "... to calc" has a word the others lack

    early = History(tmp_path / "early", loop_threshold=2)
    rephrasing(early, 2)
    assert early.loop().warning is not None

    at_once = History(tmp_path / "at_once", warned_repeats=0)
    rephrasing(at_once, 3)
    assert at_once.loop().detected is True
    assert "after a warning" not in at_once.loop().detail

    patient = History(tmp_path / "patient", loop_window=6, warned_repeats=2)
    rephrasing(patient, 3)
    for detected in (False, False, True):
        status = patient.loop()
        assert status.warning is not None
        assert status.detected is detected
        patient.add(REPHRASED[0], "gate_failed", [1], [DIVIDE_TEST])
    assert "2 after a warning" in status.detail


def test_loop_keys_are_checked(tmp_path: Path) -> None:
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "SPEC.md").write_text("# spec\n")
    path = tmp_path / "soda.toml"
    path.write_text("[loop]\nloop_window = 3\n")
    with pytest.raises(ConfigError, match="warned_repeats .1. must not exceed loop_window .3."):
        load(path)
    path.write_text("[loop]\nintent_similarity = 0\nwarned_repeats = 11\n")
    with pytest.raises(ConfigError) as error:
        load(path)
    assert "loop.intent_similarity" in str(error.value)
    assert "loop.warned_repeats" in str(error.value)
    path.write_text("[loop]\nloop_window = 3\nwarned_repeats = 0\nintent_similarity = 0.8\n")
    assert load(path).loop.intent_similarity == 0.8
