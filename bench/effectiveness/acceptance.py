"""The acceptance step: the task's hidden tests on a clean checkout of what soda made.

The milestone branch's tip is checked out in a fresh worktree (nothing of the
run's worktrees, caches or state comes along), the task's `acceptance/` files
are copied in, and the project's test command runs there through soda's own
test runner, in soda's jail: the code under test was written by a model. With
pytest the runner gives per-test results, so "solved" can demand more than an
exit code of 0: the whole suite passes, and every acceptance test file ran at
least one test, none of them skipped, all importing the checkout's own code.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.effectiveness.suite import Task
from soda.config import Config
from soda.gate.rules import own_modules
from soda.gate.runner import TestReport, run_tests
from soda.repo.git import open_repo
from soda.system.jail import Jail

KEPT_FAILURES = 50
"""Failing test ids kept in the report (the summary line names the first three)."""


@dataclass(frozen=True)
class Acceptance:
    """What the acceptance run found."""

    solved: bool
    summary: str
    """One line, e.g. "4 of 6 acceptance tests passed; failing: ..."."""
    commit: str
    """The commit judged (the milestone tip, or the base when soda made no branch)."""
    passed: int = 0
    """Acceptance tests that passed (the project's own tests not counted)."""
    total: int = 0
    suite: str = ""
    """The whole run's summary (acceptance and the project's own tests)."""
    failing: tuple[str, ...] = ()
    own_failed: int = 0
    """The project's own tests (not the acceptance tests) that failed."""

    def to_json(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["failing"] = list(self.failing)
        return data


def judge(task: Task, config: Config, repo_dir: Path, branch: str, checkout: Path) -> Acceptance:
    """Run the acceptance tests on `branch` of the repository at `repo_dir` (the
    base branch when soda never made it), in a new worktree at `checkout`."""
    repo = open_repo(repo_dir)
    names = {head.name for head in repo.heads}
    ref = branch if branch in names else config.project.base_branch
    commit = repo.git.rev_parse("--verify", f"{ref}^{{commit}}")
    repo.git.worktree("add", "--detach", str(checkout), commit)
    try:
        copy_acceptance(task, checkout)
        jail = Jail.for_config(config, Path(repo.git_dir))
        report = run_tests(config, jail, checkout, own_modules(repo, commit))
    finally:
        repo.git.worktree("remove", "--force", str(checkout))
    return verdict(task, report, commit)


def copy_acceptance(task: Task, checkout: Path) -> None:
    """The acceptance files into the checkout, under [acceptance] into."""
    source = task.folder / "acceptance"
    for relative in task.acceptance_files:
        target = checkout / task.acceptance_into / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / relative, target)


def acceptance_modules(task: Task) -> set[str]:
    """The module names of the acceptance test files (test_*.py, *_test.py)."""
    return {
        path.stem
        for path in task.acceptance_files
        if path.suffix == ".py" and (path.stem.startswith("test_") or path.stem.endswith("_test"))
    }


def _in_module(test_id: str, modules: set[str]) -> str | None:
    """The acceptance module a test id belongs to (a class inside one included)."""
    parts = test_id.split("::", 1)[0].split(".")
    return next((part for part in parts if part in modules), None)


def verdict(task: Task, report: TestReport, commit: str) -> Acceptance:
    """Solved or not, from the acceptance run's report."""
    suite = report.summary()
    if report.timed_out or report.problem or not report.detailed:
        solved = report.returncode == 0 and not report.timed_out and not report.problem
        why = "the tests passed (exit code only)" if solved else f"the test run failed: {suite}"
        return Acceptance(solved, why, commit, suite=suite)
    modules = acceptance_modules(task)
    mine = {t for t in report.passed | report.failed | report.skipped if _in_module(t, modules)}
    passed = len(mine & report.passed)
    ran = {_in_module(t, modules) for t in mine - report.skipped}
    failing = tuple(sorted(report.failed))[:KEPT_FAILURES]
    problems = []
    own = len(report.failed - mine)
    if report.failed:
        shown = [name.split("::", 1)[-1] for name in failing[:3]]
        more = len(report.failed) - len(shown)
        problems.append(
            f"failing: {', '.join(shown)}"
            + (f" and {more} more" if more else "")
            + (f" ({own} of them the project's own tests)" if own else "")
        )
    if missing := sorted(modules - ran):
        problems.append(f"never ran: {', '.join(missing)}")
    if skipped := mine & report.skipped:
        problems.append(f"{len(skipped)} acceptance test(s) skipped")
    if report.foreign_imports:
        problems.append(f"imported from outside the checkout: {report.foreign_imports[0]}")
    if report.returncode != 0 and not problems:
        problems.append(f"the test command exited {report.returncode}")
    head = f"{passed} of {len(mine)} acceptance tests passed"
    summary = "; ".join([head, *problems])
    return Acceptance(not problems, summary, commit, passed, len(mine), suite, failing, own)
