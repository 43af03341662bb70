"""Target tests: the plan names, per task, the tests that show it done; the merge
needs them passing on the merged tree besides the no-regression rule; DONE's
confirmation shows which tests prove each acceptance criterion.

The end-to-end tests run the loop on the demo's sample project (real git, the
real gate in the jail, real pytest) with a behavioural fake model: the planner
proposes a task with target tests and the executor writes a `calc.py` of the
test's choosing, the same one on every attempt."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from soda.cli.report import show_iteration
from soda.config import Config, load
from soda.contracts import IterationPlan, PlanTask, load_schema, validate
from soda.errors import Violation
from soda.gate import confirm_done
from soda.gate.rules import gate
from soda.gate.runner import TestReport
from soda.gate.targets import covers, judge, spec_criteria
from soda.llm.base import ModelRequest
from soda.llm.function import FunctionModel, Reply, call, first_turn, submit
from soda.loop.act.brief import target_input
from soda.loop.iteration_report import line
from soda.loop.run import Ending, run_loop
from soda.loop.session import Session
from tests.conftest import git
from tests.plan_fakes import (
    done,
    events,
    fake_model,
    new_project,
    open_session,
    plan,
)
from tests.test_loop import DEMO_SCRIPT, project
from tests.web_helpers import serving

WRONG = '''"""A calculator that looks done and is not."""


def add(a: float, b: float) -> float:
    return a + b


def subtract(a: float, b: float) -> float:
    return a + b


def divide(a: float, b: float) -> float:
    return a * b
'''
"""subtract and divide exist (so the acceptance tests import them) and are wrong:
test_add still passes, the acceptance tests still fail; nothing that passed breaks."""

RIGHT = '''"""A calculator."""


def add(a: float, b: float) -> float:
    return a + b


def subtract(a: float, b: float) -> float:
    return a - b


def divide(a: float, b: float) -> float:
    if b == 0:
        raise ValueError("cannot divide by zero")
    return a / b
'''

ACCEPTANCE = [
    "tests/test_acceptance.py::test_subtract",
    "tests/test_acceptance.py::test_divide",
    "tests/test_acceptance.py::test_divide_by_zero_is_a_clear_error",
]


def calc_task(targets: Any = None, reason: str | None = None, **extra: Any) -> dict[str, Any]:
    """The plan's one task: subtract and divide in calc.py."""
    fields: dict[str, Any] = {
        "id": "a",
        "task_id": None,
        "title": "Implement subtract and divide",
        "description": "Add subtract and divide to calc.py",
        "depends_on": [],
        "risk": "low",
        "tool_hints": [],
        **extra,
    }
    if targets is not None:
        fields["target_tests"] = targets
    if reason is not None:
        fields["no_target_tests_reason"] = reason
    return fields


def writes(content: str, briefs: list[str] | None = None) -> Any:
    """An executor that writes `content` to calc.py, then says it is done (every
    attempt alike); `briefs` keeps each attempt's first message."""

    def answer(request: ModelRequest) -> Reply:
        if first_turn(request):
            if briefs is not None:
                briefs.append(request.messages[0].text)
            return call("write_file", path="calc.py", content=content)
        return done("calc.py is finished")

    return answer


def retrier(asked: list[str]) -> Any:
    def answer(request: ModelRequest) -> Reply:
        asked.append(request.messages[0].text)
        return submit({"description": "Try calc.py once more", "reason": "the targets failed"})

    return answer


def one_iteration(tmp_path: Path, model: FunctionModel, retries: int = 0) -> tuple[Session, Path]:
    settings = {"task_retries = 0": f"task_retries = {retries}"} if retries else None
    root = new_project(tmp_path, settings)
    session = open_session(root, model)
    result = run_loop(session, lambda line: None, once=True)
    assert result.ending is Ending.CONTINUE, result.reason
    return session, root


def act_record(session: Session) -> dict[str, Any]:
    row = session.db.execute("SELECT outcome, act_json FROM iterations").fetchone()
    act: dict[str, Any] = json.loads(row[1])
    assert act["outcome"] == row[0]
    return act


# --- end to end: the gate on the merged tree ------------------------------------


def test_a_wrong_change_whose_targets_fail_is_refused_naming_them(tmp_path: Path) -> None:
    briefs: list[str] = []
    asked: list[str] = []
    model = fake_model(
        plan(calc_task(ACCEPTANCE)),
        executor=writes(WRONG, briefs),
        retrier=retrier(asked),
    )
    session, root = one_iteration(tmp_path, model, retries=1)
    before = git(root, "rev-parse", "main")  # the milestone starts where main is
    act = act_record(session)
    assert act["outcome"] == "targets_failed"
    assert "target test(s) do not pass" in act["detail"]
    for name in ("test_subtract", "test_divide"):
        assert name in act["detail"]
    # the failing targets with their output, as recorded and as the retrier read them
    failing = act["failing"]
    assert failing["tests.test_acceptance::test_subtract"].startswith("assert")
    assert "assert 27 == 3" in failing["tests.test_acceptance::test_divide"]
    [task] = act["tasks"]
    assert (task["failure"], task["attempts"]) == ("targets_failed", 2)
    assert task["target_tests"] == ACCEPTANCE
    assert len(asked) == 1 and "kind: targets_failed" in asked[0]
    assert "tests.test_acceptance::test_subtract" in asked[0]
    # both attempts saw the targets; the second also the refusal
    assert len(briefs) == 2
    for brief in briefs:
        assert task_of_text(brief)["target_tests"] == ACCEPTANCE
    assert "notes" not in task_of_text(briefs[0])
    [note] = task_of_text(briefs[1])["notes"]
    assert note.startswith("The last attempt was refused, not merged:")
    assert "tests.test_acceptance::test_divide" in note and "assert 27 == 3" in note
    # never merged: the milestone did not move, Trace's task is not closed
    assert git(root, "rev-parse", "soda/spec") == before
    assert "def subtract" not in git(root, "show", "soda/spec:calc.py")
    assert session.tracker.show(task["task_id"]).status == "open"
    gates = events(session, "act.gate")
    assert len(gates) == 2 and not any(g["ok"] for g in gates)
    assert {t["target"]: t["status"] for t in gates[0]["targets"]} == dict.fromkeys(
        ACCEPTANCE, "failed"
    )
    shown = show_iteration(session.db, 1)
    assert "targets_failed" in shown and "held against the change:" in shown
    assert "target tests: " + ", ".join(ACCEPTANCE) in shown


def test_the_same_wrong_change_every_iteration_never_lands(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    session = open_session(
        root, fake_model(plan(calc_task(["tests/test_acceptance.py"])), executor=writes(WRONG))
    )
    before = git(root, "rev-parse", "main")
    for _ in range(3):
        result = run_loop(session, lambda line: None, once=True)
        assert git(root, "rev-parse", "soda/spec") == before
        if result.ending is not Ending.CONTINUE:  # loop detection may stop it: fine
            break
    outcomes = [row[0] for row in session.db.execute("SELECT outcome FROM iterations")]
    assert "targets_failed" in outcomes and "merged" not in outcomes, outcomes


def test_a_right_change_with_passing_targets_merges(tmp_path: Path) -> None:
    model = fake_model(plan(calc_task(["tests/test_acceptance.py"])), executor=writes(RIGHT))
    session, root = one_iteration(tmp_path, model)
    act = act_record(session)
    assert act["outcome"] == "merged", act["detail"]
    assert "target tests pass: tests/test_acceptance.py" in act["detail"]
    assert git(root, "show", "soda/spec:calc.py") == RIGHT.rstrip("\n")


def test_a_task_without_targets_and_a_reason_keeps_todays_rule(tmp_path: Path) -> None:
    briefs: list[str] = []
    reason = "a refactoring: the existing tests cover it"
    model = fake_model(plan(calc_task([], reason)), executor=writes(WRONG, briefs))
    session, root = one_iteration(tmp_path, model)
    act = act_record(session)
    # nothing that passed fails: the gate's rule of old merges it
    assert act["outcome"] == "merged", act["detail"]
    assert "def subtract" in git(root, "show", "soda/spec:calc.py")
    assert task_of_text(briefs[0])["no_target_tests_reason"] == reason
    assert "target_tests" not in task_of_text(briefs[0])


def test_a_target_test_that_does_not_exist_counts_as_failing(tmp_path: Path) -> None:
    missing = "tests/test_acceptance.py::test_multiply"
    model = fake_model(
        plan(calc_task(["tests/test_acceptance.py", missing])), executor=writes(RIGHT)
    )
    session, root = one_iteration(tmp_path, model)
    act = act_record(session)
    assert act["outcome"] == "targets_failed"
    assert f"{missing} (not found)" in act["detail"]
    assert act["failing"][missing].startswith("not found")
    assert "def subtract" not in git(root, "show", "soda/spec:calc.py")


def task_of_text(text: str) -> dict[str, Any]:
    """The `## Task` input of an executor's first message."""
    found: dict[str, Any] = json.loads(text.split("## Task\n\n", 1)[1].split("\n\n## ", 1)[0])
    return found


# --- DONE's confirmation: which tests prove each criterion -----------------------


def test_done_lists_the_tests_that_prove_each_criterion(tmp_path: Path) -> None:
    root = project(tmp_path, DEMO_SCRIPT)
    session = Session.open(session_config(root))
    result = run_loop(session, lambda line: None)
    assert result.ending is Ending.DONE, result.reason
    report = json.loads(
        session.db.execute("SELECT report_json FROM iterations WHERE number = 2").fetchone()[0]
    )
    proof = {entry["criterion"].split(" (")[0]: entry for entry in report["proof"]}
    subtract = proof["`calc.subtract(a, b)` returns `a - b`"]
    assert subtract["proven"] is True
    assert subtract["tests"] == [
        {
            "target": "tests/test_acceptance.py::test_subtract",
            "status": "passed",
            "tests": ["tests.test_acceptance::test_subtract"],
        }
    ]
    assert all(entry["proven"] for entry in report["proof"])
    assert line(report).endswith("; 4 of 4 criteria proven by tests")
    shown = show_iteration(session.db, 2)
    assert "acceptance criteria and the tests that prove them:" in shown
    assert "tests/test_acceptance.py::test_divide passed" in shown
    # the demo's plan named its acceptance tests as the task's targets
    assert "target tests: tests/test_acceptance.py" in show_iteration(session.db, 1)
    with serving(root) as web:
        status, _, html = web.request("GET", "/iteration/2")
        assert status == 200
        assert (
            'id="proof"' in html
            and "tests/test_acceptance.py::test_subtract</code>: passed" in html
        )
        _, _, first = web.request("GET", "/iteration/1")
        assert "Target tests: <code>tests/test_acceptance.py</code>" in first


def session_config(root: Path) -> Config:
    return load(root / "soda.toml")


def test_done_is_refused_when_a_test_the_spec_names_is_not_found(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    (root / "calc.py").write_text(RIGHT)
    spec = root / "specs" / "SPEC.md"
    spec.write_text(
        spec.read_text().replace(
            "## Constraints",
            "- [ ] `calc.multiply(a, b)` works (`tests/test_acceptance.py::test_multiply`).\n\n"
            "## Constraints",
        )
    )
    git(root, "commit", "-qam", "the code is right; the spec asks for one more test")
    session = open_session(root, fake_model(None))
    args = (session.config, session.jail, session.db, session.checkouts)
    refused = confirm_done(*args, session.milestone.branch, session.events)
    assert refused is not None
    assert "tests/test_acceptance.py::test_multiply (not found)" in refused
    [tested] = events(session, "done.tests")
    by_test = {t["target"]: t["status"] for e in tested["proof"] for t in e["tests"]}
    assert by_test["tests/test_acceptance.py::test_subtract"] == "passed"
    assert by_test["tests/test_acceptance.py::test_multiply"] == "not found"
    # without the criterion that names a missing test, the same tip is DONE
    spec.write_text(spec.read_text().replace("(`tests/test_acceptance.py::test_multiply`)", ""))
    assert confirm_done(*args, session.milestone.branch, session.events) is None


# --- the rule and the names, on reports made by hand ------------------------------


def report(passed: set[str], failed: set[str], skipped: frozenset[str] = frozenset()) -> TestReport:
    return TestReport(
        returncode=1 if failed else 0,
        timed_out=False,
        passed=frozenset(passed),
        failed=frozenset(failed),
        skipped=frozenset(skipped),
        detailed=True,
        failures={name: f"AssertionError in {name}" for name in failed},
    )


BASE = report(
    {"tests.test_calc::test_add"}, {"tests.test_acc::test_sub", "tests.test_acc::test_div"}
)


def test_the_gate_refuses_failing_targets_after_the_regressions() -> None:
    after = report(
        {"tests.test_calc::test_add"}, {"tests.test_acc::test_sub", "tests.test_acc::test_div"}
    )
    assert gate(BASE, after).ok  # today's rule: nothing that passed fails
    verdict = gate(BASE, after, targets=["tests/test_acc.py::test_sub"])
    assert verdict.targets_failed and not verdict.approval
    assert "tests/test_acc.py::test_sub (failed)" in verdict.reason
    assert [t.target for t in verdict.targets] == ["tests/test_acc.py::test_sub"]
    assert "AssertionError in tests.test_acc::test_sub" in verdict.targets[0].output
    # a regression is refused as before (gate_failed), naming the targets too
    broken = report(set(), {"tests.test_calc::test_add", "tests.test_acc::test_sub"})
    regression = gate(BASE, broken, targets=["tests/test_acc.py::test_sub"])
    assert not regression.ok and not regression.targets_failed
    assert "passed before and fail now" in regression.reason
    assert "target tests not passing" in regression.reason
    # a new failing test that is a target is a target's refusal, not a new failure
    new = report({"tests.test_calc::test_add"}, {"tests.test_new::test_it"})
    assert gate(BASE, new, targets=["tests/test_new.py"]).targets_failed
    assert not gate(BASE, new, targets=["tests/test_acc.py"]).targets_failed


def test_skipped_or_missing_targets_do_not_pass() -> None:
    after = report({"tests.test_calc::test_add"}, set(), frozenset({"tests.test_acc::test_sub"}))
    results = {
        r.target: r.status
        for r in judge(after, ["test_sub", "tests/test_acc.py::test_x", "tests/test_calc.py"])
    }
    assert results == {
        "test_sub": "skipped",
        "tests/test_acc.py::test_x": "not found",
        "tests/test_calc.py": "passed",
    }
    assert gate(BASE, after, targets=["test_sub"]).targets_failed
    assert gate(BASE, after, targets=["tests/test_calc.py"]).ok


def test_without_a_per_test_report_the_exit_code_stands_in() -> None:
    weak = TestReport(returncode=0, timed_out=False)
    verdict = gate(weak, weak, targets=["tests/test_acc.py"])
    assert verdict.ok and "not checked one by one" in verdict.reason
    assert not gate(weak, TestReport(returncode=1, timed_out=False), targets=["x"]).ok


def test_targets_are_found_by_node_id_file_directory_or_name() -> None:
    name = "tests.unit.test_acc.TestDivide::test_by[0.5]"
    for target in (
        "tests/unit/test_acc.py::TestDivide::test_by[0.5]",
        "tests/unit/test_acc.py::TestDivide::test_by",
        "tests/unit/test_acc.py::TestDivide",
        "tests/unit/test_acc.py",
        "tests/unit/",
        "test_acc.py",
        "test_by",
        "TestDivide::test_by",
    ):
        assert covers(target, name), target
    # a report's dotted module that ends like an extension is a module, not a file
    assert covers("pkg/rs.py", "pkg.rs::test_x") and not covers("pkg/py.py", "pkg::test_x")
    assert covers("src/sum.test.js", "src/sum.test.js::adds")  # a runner naming paths
    for target in (
        "tests/unit/test_acc.py::TestDivide::test_by[2]",
        "tests/unit/test_ac.py",
        "tests/unit/test_acc.py::test_by_zero",
        "test_b",
        "",
    ):
        assert not covers(target, name), target


def test_the_spec_ties_criteria_to_tests() -> None:
    spec = """# Title

Mentions `tests/test_other.py` outside the criteria.

## Acceptance criteria

- [ ] `calc.subtract(a, b)` returns `a - b`
      (`tests/test_acceptance.py::test_subtract`).
- [ ] tests/test_x.py::test_y[1] passes, and `test_divide` too.
- [x] The suite in `tests/` passes; `pkg/calc_test.go` too.
* A line naming no test, with `some code`.

## Constraints

- `tests/test_constraints.py` is not a criterion.
"""
    criteria = spec_criteria(spec)
    assert [c.tests for c in criteria] == [
        ("tests/test_acceptance.py::test_subtract",),
        ("tests/test_x.py::test_y[1]", "test_divide"),
        ("tests/", "pkg/calc_test.go"),
        (),
    ]
    assert criteria[0].text.endswith("(`tests/test_acceptance.py::test_subtract`).")


def test_a_plan_without_targets_still_reads_and_says_nothing() -> None:
    # the model is asked for both fields, as strict modes want (no default, required)
    task_schema = load_schema("plan")["$defs"]["PlanTask"]
    assert {"target_tests", "no_target_tests_reason"} <= set(task_schema["required"])
    assert not any("default" in prop for prop in task_schema["properties"].values())
    # a plan written before them (a stored plan, a fake) validates with the defaults
    stored = validate("plan", {"intent": "i", "approach": "a", "tasks": [calc_task()]})
    assert isinstance(stored, IterationPlan)
    assert stored.tasks[0].target_tests == []
    wrong = validate("plan", {"intent": "i", "approach": "a", "tasks": [calc_task("t")]})
    assert isinstance(wrong, Violation) and wrong.path == "$.tasks[0].target_tests"
    old = PlanTask.model_validate(calc_task())
    assert (old.target_tests, old.no_target_tests_reason) == ([], "")
    assert target_input(old) == {}
    assert target_input(old.model_copy(update={"target_tests": ["t"]})) == {"target_tests": ["t"]}


def test_the_demo_plan_names_its_acceptance_tests() -> None:
    planner = next(r for r in DEMO_SCRIPT if r["agent"] == "planner")
    [task] = planner["tool_calls"][0]["input"]["iteration_plan"]["tasks"]
    assert task["target_tests"] == ["tests/test_acceptance.py"]
