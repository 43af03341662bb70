"""The executor's `run_tests`: the configured test command in its own worktree,
in the jail, narrowed by a selector. A real ACT run on the demo's sample project
(git, SQLite, bubblewrap); the model is the only fake. The executor writes a
test that fails, runs just that test, fixes the code, runs it again and then the
whole suite; none of its runs is kept as the gate's evidence."""

from __future__ import annotations

from pathlib import Path

from soda.llm.base import ModelRequest
from soda.llm.function import Reply, call, last_results
from soda.loop.run import run_loop
from soda.tools.tests import selected_command
from tests.plan_fakes import done, fake_model, new_project, open_session, plan, task

CALC = '''"""A tiny calculator library."""


def add(a: float, b: float) -> float:
    return a + b


def subtract(a: float, b: float) -> float:
    return a - b


def divide(a: float, b: float) -> float:
    if b == 0:
        raise ValueError("cannot divide by zero")
    return a / b
'''


def new_test(root: Path) -> str:
    """A test of divide that also proves where it runs: in the jail the worktree
    is mounted at the repository's own path (outside it, the worktree lives under
    state/), and the person's checkout has no such file."""
    return (
        "from pathlib import Path\n\n\n"
        "def test_divide_thirds() -> None:\n"
        "    from calc import divide\n\n"
        f"    assert Path(__file__).resolve().parent.parent == Path({str(root)!r})\n"
        "    assert divide(9, 3) == 3\n"
    )


def test_run_tests_runs_the_worktree_in_the_jail_and_honours_a_selector(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    steps: list[Reply] = [
        call("write_file", path="tests/test_divide.py", content=new_test(root)),
        call("run_tests", selector="tests/test_divide.py"),
        call("write_file", path="calc.py", content=CALC),
        call("run_tests", selector="tests/test_divide.py::test_divide_thirds"),
        call("run_tests", selector="-k divide"),
        call("run_tests", selector=f"{root}/tests/test_divide.py"),
        call("run_tests", selector=""),
        done("added subtract and divide"),
    ]
    results: list[str] = []

    def executor(request: ModelRequest) -> Reply:
        results.extend(last_results(request))
        return steps[sum(1 for message in request.messages if message.tool_calls)]

    session = open_session(root, fake_model(plan(task("a")), executor=executor))
    assert session.jail.mode == "bwrap"
    command = session.config.project.test_command
    run_loop(session, lambda line: None, once=True)

    _, failing, _, passing, option, absolute, whole = results
    # Just the selected file, in the worktree: the new test fails for the right reason.
    assert failing.startswith(f"ran `{command} tests/test_divide.py` in your worktree: ")
    assert "0 passed, 1 failed" in failing
    assert "test_divide_thirds" in failing and "cannot import name 'divide'" in failing
    # After the edit: the worktree's code, not the person's checkout (which has no
    # divide), and the test saw the worktree at the repository's path (the jail).
    assert "1 passed, 0 failed" in passing, passing
    assert not (root / "tests" / "test_divide.py").exists()
    assert "not an option" in option
    assert "tests/test_divide.py` in your worktree: 1 passed, 0 failed" in absolute
    assert whole.startswith(f"ran `{command}` in your worktree: 5 passed, 0 failed"), whole
    # The work merged on the gate's own run; the executor's runs were never kept.
    (outcome,) = [row["outcome"] for row in session.db["iterations"].rows]
    assert outcome == "merged"
    kept = {row["summary"] for row in session.db["test_results"].rows}
    assert kept and not kept & {"0 passed, 1 failed (exit 1)", "1 passed, 0 failed (exit 0)"}
    session.finish_run("done", "test")


def test_a_selector_is_added_the_way_the_command_takes_it(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    one = "tests/test_x.py::test_y"
    # pytest: the paths the command ends with would run too, so they go.
    assert selected_command("python -m pytest -q tests", one, tmp_path) == (
        f"python -m pytest -q {one}"
    )
    assert selected_command("pytest tests", one, tmp_path) == f"pytest {one}"
    # An option's value is not a path to drop; a missing path is not one either.
    assert selected_command("pytest --rootdir tests", one, tmp_path) == (
        f"pytest --rootdir tests {one}"
    )
    assert selected_command("pytest -q nowhere", one, tmp_path) == f"pytest -q nowhere {one}"
    assert selected_command("npm test", "src/a.test.js", tmp_path) == "npm test -- src/a.test.js"
    # go test: a package replaces the patterns; a test id becomes -run (tests/test_runners.py).
    assert selected_command("go test ./...", "./pkg", tmp_path) == "go test ./pkg"
    assert selected_command("go test -json ./...", "example.com/m/TestA/sub", tmp_path) == (
        "go test -json example.com/m -run '^TestA$/^sub$'"
    )
    assert selected_command("pytest -q", "", tmp_path) == "pytest -q"
    assert selected_command("pytest", "a b.py", tmp_path) == "pytest 'a b.py'"
