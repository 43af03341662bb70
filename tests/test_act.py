"""ACT's deterministic parts: the plan DAG, the gate, and the worktree/merge mechanics
on real git repositories."""

from __future__ import annotations

from pathlib import Path

import pytest
from git import Repo

from soda.contracts import IterationPlan, PlanTask
from soda.contracts.plan_dag import batches, plan_problems
from soda.errors import StructuralError
from soda.gate.rules import gate
from soda.gate.runner import TestReport
from soda.loop.act.execute import TaskOutcome, execute_plan
from soda.repo.checkouts import Checkouts
from soda.repo.workspace import merge_into_milestone
from tests.conftest import git


def task(key: str, *deps: str, task_id: int | None = None) -> PlanTask:
    return PlanTask(
        id=key,
        task_id=task_id,
        title=f"task {key}",
        description="",
        depends_on=list(deps),
        risk="low",
        tool_hints=[],
    )


def plan(*tasks: PlanTask) -> IterationPlan:
    return IterationPlan(intent="i", approach="a", tasks=list(tasks))


def test_batches_are_topological_layers() -> None:
    layers = batches(plan(task("c", "a", "b"), task("a"), task("b", "a"), task("d")))
    assert [[t.id for t in layer] for layer in layers] == [["a", "d"], ["b"], ["c"]]


def test_cycle_is_structural() -> None:
    with pytest.raises(StructuralError, match="cycle"):
        batches(plan(task("a", "b"), task("b", "a")))


def test_plan_problems_names_each_problem() -> None:
    problems = plan_problems(plan(task("a", "zz"), task("a"), task("b", task_id=42)), {1, 2})
    assert "duplicate task keys ['a']" in problems
    assert "task 'a' depends on unknown keys ['zz']" in problems
    assert "task 'b' names Trace task 42, which does not exist" in problems
    assert plan_problems(plan(task("a"), task("b", "a", task_id=2)), {1, 2}) == []
    assert any("cycle" in p for p in plan_problems(plan(task("a", "b"), task("b", "a")), set()))


def test_plan_problems_caps_the_number_of_tasks() -> None:
    three = plan(task("a"), task("b"), task("c"))
    assert plan_problems(three, set(), max_tasks=3) == []
    assert plan_problems(three, set(), max_tasks=2) == [
        "plan has 3 tasks, more than the limit of 2 ([plan] max_tasks): "
        "merge or drop tasks, or leave some for a later iteration"
    ]
    assert plan_problems(plan(*(task(str(n)) for n in range(9))), set())  # default 8


def test_dependents_of_a_failed_task_are_skipped_unless_another_dependency_finished() -> None:
    ran: list[tuple[str, list[str]]] = []

    def run(t: PlanTask, missing: list[str]) -> TaskOutcome:
        ran.append((t.id, missing))
        return TaskOutcome(t, "gave_up" if t.id == "a" else "completed")

    report = execute_plan(
        plan(task("a"), task("b"), task("c", "a"), task("d", "a", "b")), run, lambda: False
    )
    status = {o.task.id: o.status for o in report.outcomes}
    assert status == {"a": "gave_up", "b": "completed", "c": "skipped", "d": "completed"}
    assert ("d", ["a"]) in ran  # d ran with partial context and was told what is missing


def test_cancelled_plan_skips_pending_tasks() -> None:
    calls = []
    report = execute_plan(
        plan(task("a"), task("b", "a")),
        lambda t, m: calls.append(t.id) or TaskOutcome(t, "completed"),
        lambda: bool(calls),
    )
    assert calls == ["a"]
    assert report.outcomes[1].status == "skipped"
    assert "cancelled" in report.outcomes[1].reason


def report(
    passed: set[str], failed: set[str] = frozenset(), rc: int = 0, detailed: bool = True
) -> TestReport:
    return TestReport(rc, False, frozenset(passed), frozenset(failed), detailed)


@pytest.mark.parametrize(
    ("baseline", "after", "ok", "fragment"),
    [
        (report({"a"}, {"b"}, 1), report({"a", "b"}), True, "no regressions"),
        (
            report({"a", "b"}),
            report({"a"}, {"b"}, 1),
            False,
            "1 test(s) passed before and fail now: b",
        ),
        (report({"a", "b"}), report({"a"}), False, "passed before"),  # a vanished test counts
        (report({"a"}, {"b"}, 1), report({"a"}, {"b"}, 1), True, "no regressions"),
        (report(set(), rc=1, detailed=False), report(set(), rc=0, detailed=False), True, "passed"),
        (
            report(set(), rc=0, detailed=False),
            report(set(), rc=1, detailed=False),
            False,
            "exit code 1",
        ),
        (report({"a"}), TestReport(None, True), False, "timed out"),
    ],
)
def test_gate_fails_closed(
    baseline: TestReport, after: TestReport, ok: bool, fragment: str
) -> None:
    verdict = gate(baseline, after)
    assert verdict.ok is ok
    assert fragment in verdict.reason


def milestone_repo(repo: Path) -> Checkouts:
    git(repo, "branch", "soda/spec", "main")
    return Checkouts(Repo(repo), repo / "state" / "worktrees")


def moved_by_someone(pool: Checkouts, path: str, text: str) -> None:
    """Another worktree lands a change on the milestone meanwhile."""
    other = pool.work("soda/spec", "soda-work/spec/other")
    (other.path / path).write_text(text)
    other.commit_all(path)
    merge_into_milestone(other, path)
    pool.release(other)


def test_merge_lands_on_milestone_without_touching_the_checkout(repo: Path) -> None:
    pool = milestone_repo(repo)
    ws = pool.work("soda/spec", "soda-work/spec/iter-1")
    (ws.path / "new.py").write_text("x = 1\n")
    assert ws.commit_all("add new") is not None
    assert ws.catch_up()
    commit = merge_into_milestone(ws, "soda: test\n\nSoda-Iteration: 1\n")
    pool.release(ws)
    pool.remove_all()

    assert git(repo, "rev-parse", "soda/spec") == commit
    assert git(repo, "rev-list", "--parents", "-n1", commit).count(" ") == 2  # a real merge
    assert "Soda-Iteration: 1" in git(repo, "log", "-1", "--format=%B", commit)
    assert git(repo, "branch", "--show-current") == "main"
    assert not (repo / "new.py").exists()
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == ""
    assert not ws.path.exists()
    assert git(repo, "branch", "--list", "soda-work/*") == ""
    assert "work-0" not in git(repo, "worktree", "list")


def test_catch_up_conflict_aborts_cleanly(repo: Path) -> None:
    pool = milestone_repo(repo)
    ws = pool.work("soda/spec", "soda-work/spec/iter-1")
    (ws.path / "README.md").write_text("mine\n")
    ws.commit_all("mine")
    moved_by_someone(pool, "README.md", "theirs\n")  # a conflicting change
    milestone_before = git(repo, "rev-parse", "soda/spec")

    assert ws.catch_up() is False
    assert git(ws.path, "status", "--porcelain") == ""
    assert git(repo, "rev-parse", "soda/spec") == milestone_before
    pool.release(ws)
    pool.remove_all()


def test_merge_refuses_when_milestone_moved_underneath(repo: Path) -> None:
    pool = milestone_repo(repo)
    ws = pool.work("soda/spec", "soda-work/spec/iter-1")
    (ws.path / "a.txt").write_text("a\n")
    ws.commit_all("a")
    moved_by_someone(pool, "b.txt", "b\n")
    with pytest.raises(StructuralError, match="does not contain"):
        merge_into_milestone(ws, "a")  # not caught up: refused, never a blind overwrite
    pool.release(ws)
    pool.remove_all()


def test_leftovers_of_a_crash_are_cleaned_by_a_new_pool(repo: Path) -> None:
    pool = milestone_repo(repo)
    first = pool.work("soda/spec", "soda-work/spec/iter-1")
    (first.path / "junk").write_text("left behind\n")
    # The process dies: a new pool (a new process) takes the same tree over.
    again = Checkouts(Repo(repo), pool.root).work("soda/spec", "soda-work/spec/iter-1")
    assert again.path == first.path
    assert not (again.path / "junk").exists()
    pool.release(again)
    pool.remove_all()
