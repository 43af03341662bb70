"""`run_tests`: the project's configured test command, for two kinds of agents,
so that neither guesses how to run the tests (in the jail a hand-written
`python -m pytest` can run another interpreter, or an installed copy of the
project instead of the code under work).

- ORIENT's agents (`test_tools`): the suite on a clean checkout of the milestone
  tip, through the gate's cached path (`soda.gate.tested`): results are kept by
  tree id, so a second call, another agent's call, and ACT's baseline on the
  same tip cost nothing.
- the executor (`worktree_test_tools`): the command in its own worktree as it
  stands, edits included, in the jail, narrowed by an optional selector
  (`selected_command`). Never cached (the worktree's tree is not committed yet)
  and never the gate's evidence: the gate runs the whole suite again on a clean
  checkout of the commit, and only that run decides the merge.

Both answers are bounded: counts, then the failing tests with the first lines of
each failure (soda.gate.evidence's bounds), or why there is no per-test report
and the end of the output.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from soda.config import Config
from soda.gate import runners
from soda.gate.evidence import MAX_FAILING, first_lines
from soda.gate.rules import NOT_PROJECT_MODULES
from soda.gate.runner import TestReport, is_pytest, run_tests
from soda.llm.base import ToolSpec
from soda.system.jail import Jail
from soda.tools.sandbox import Sandbox, ToolError
from soda.tools.toolbox import Tool, object_schema

TestRun = Callable[[], tuple[TestReport, bool]]
"""Runs (or finds cached) the tip's tests: the report, and whether it was cached."""
OUTPUT_TAIL_CHARS = 1500
"""Of the test command's output, when there is no per-test report to show."""
NOTHING_COLLECTED = 5
"""pytest's exit code when no test was collected (a selector that matches nothing)."""

SELECTOR_RULE = (
    "how a selector is added to the test command: for pytest, the paths the command "
    "ends with (such as `tests`) are dropped and the selector is appended (a file, a "
    "directory or a node id `path::name`); for go, cargo, vitest, jest, mocha and node "
    "--test a test id runs that test; else for `npm test` it is appended after `--`; "
    "for any other command it is appended as the last argument"
)
"""What `selected_command` does, in the words agents and the README use."""

_NPM_TEST = re.compile(r"(^|\s)(npm|yarn|pnpm)(\s+run)?\s+test$")
_PLAIN_WORD = re.compile(r"\s+([A-Za-z0-9_./:\[\]-]+)$")
_VALUE_OPTIONS = frozenset({"-k", "-m", "-p", "-o", "-c", "-n", "-W", "-r"})
"""Short pytest options whose value is the next word (so that word is not a path)."""


def test_tools(run: TestRun, commit: str) -> list[Tool]:
    """ORIENT's `run_tests`: the milestone tip's suite, cached per tree."""
    return [
        Tool(
            ToolSpec(
                "run_tests",
                # No SHA here: tool specs are the start of the cached prompt prefix.
                "Run the project's test command on a clean checkout of the milestone tip "
                "in the sandbox. Use it to judge from results, not only from reading, "
                "whether the spec's behaviour works. Results are cached per tree, so calling "
                "it again costs nothing. Returns the counts and the failing tests with the "
                "first lines of each failure.",
                object_schema({}),
            ),
            lambda _arguments: describe(*run(), commit),
        )
    ]


def describe(report: TestReport, cached: bool, commit: str) -> str:
    """The bounded answer for one run of the tip's tests."""
    source = "cached: this tree was tested before" if cached else "ran now"
    return "\n".join([f"tests at {commit[:10]} ({source}): {report.summary()}", *_details(report)])


# --- the executor's run_tests ---------------------------------------------------------


def worktree_test_tools(config: Config, jail: Jail, sandbox: Sandbox) -> list[Tool]:
    """The executor's `run_tests`: `[project] test_command` in the worktree at
    `sandbox.root`, in `jail`, with the time and output limits of `[act]`."""
    command = config.project.test_command
    kind = runners.kind_of(command, config.root)
    sample = runners.EXAMPLES.get(kind or "pytest", "tests/test_x.py::test_name")
    example = selected_command(command, sample, sandbox.root, kind)
    spec = ToolSpec(
        "run_tests",
        f"Run the project's test command, `{command}`, in your worktree as it is now (your "
        "edits included), in the jail: the way the gate runs the tests, so use this "
        "rather than writing a test command for run_command. `selector` narrows the run "
        f"to one test file or one test: {SELECTOR_RULE} (e.g. `{example}`). An empty "
        "selector runs the whole suite. Returns the counts and the failing tests with the "
        "first lines of each failure, or the end of the output when there is no per-test "
        "report. Nothing is cached, and this run is for you only: the gate runs the whole "
        "suite again on a clean checkout of your commit, and that run decides the merge.",
        object_schema(
            {
                "selector": {
                    "type": "string",
                    "description": "A test file, or a test id as the test results name it "
                    f'(e.g. "{sample}"), relative to the repository root, or "" for '
                    "the whole suite.",
                }
            }
        ),
    )

    def handler(arguments: dict[str, Any]) -> str:
        selector = _selector(str(arguments["selector"]), sandbox, jail)
        ran = selected_command(command, selector, sandbox.root, kind)
        project = config.project.model_copy(update={"test_command": ran})
        report = run_tests(
            config.model_copy(update={"project": project}),
            jail,
            sandbox.root,
            own_modules_in(sandbox.root),
        )
        return describe_worktree(report, ran)

    return [Tool(spec, handler)]


def selected_command(command: str, selector: str, root: Path, kind: str | None = None) -> str:
    """`command` narrowed to `selector` by SELECTOR_RULE; `root` is where the
    command runs (a trailing word of a pytest command is dropped only when it names
    something there). `kind`: the runner (`soda.gate.runners.kind_of`), read from
    the command and `root` when not given."""
    if not selector:
        return command
    base, quoted = command.rstrip(), shlex.quote(selector)
    if is_pytest(base):
        return f"{_without_trailing_paths(base, root)} {quoted}"
    narrowed = runners.selected(kind or runners.kind_of(base, root), base, selector)
    if narrowed is not None:
        return narrowed
    if _NPM_TEST.search(base):
        return f"{base} -- {quoted}"
    return f"{base} {quoted}"


def _without_trailing_paths(command: str, root: Path) -> str:
    """A pytest command without the paths it ends with (`pytest -q tests` ->
    `pytest -q`): they would run besides the selection."""
    while (match := _PLAIN_WORD.search(command)) is not None:
        word, before = match.group(1), command[: match.start()].split()
        if (
            not before
            or word.startswith("-")
            or before[-1] in _VALUE_OPTIONS
            or (before[-1].startswith("--") and "=" not in before[-1])
            or not (root / word.split("::")[0]).exists()
        ):
            break
        command = command[: match.start()]
    return command


def _selector(raw: str, sandbox: Sandbox, jail: Jail) -> str:
    """The selector as given, made relative when it is an absolute path into the
    repository (as test output in the jail prints them); ToolError when it could
    not be a test."""
    selector = raw.strip()
    if "\n" in selector or "\0" in selector:
        raise ToolError("selector must be one test file or test id, on one line")
    if selector.startswith("-"):
        raise ToolError(
            "selector must be a test file or test id, not an option; the command's "
            "options are fixed by the project's configuration"
        )
    if selector.startswith("/"):
        for root in (jail.repo_root, sandbox.root):
            if selector == str(root) or selector.startswith(f"{root}/"):
                return selector[len(str(root)) :].lstrip("/")
        raise ToolError(f"{selector!r} is outside the repository; give a path relative to it")
    return selector


def own_modules_in(root: Path) -> frozenset[str]:
    """The project's top-level Python modules in a work tree (flat and src layouts),
    so a run can tell when the tests imported another copy of them."""
    names: set[str] = set()
    for base in (root, root / "src"):
        if not base.is_dir():
            continue
        for entry in base.iterdir():
            if entry.suffix == ".py" and entry.is_file():
                names.add(entry.stem)
            elif (entry / "__init__.py").is_file():
                names.add(entry.name)
    return frozenset(names - NOT_PROJECT_MODULES)


def describe_worktree(report: TestReport, command: str) -> str:
    """The bounded answer for one run in the executor's worktree."""
    lines = [f"ran `{command}` in your worktree: {report.summary()}"]
    if report.detailed and report.returncode == NOTHING_COLLECTED and not report.passed:
        lines.append("no test was collected: check the selector (a path or a node id)")
    if report.foreign_imports:
        lines.append(
            "warning: these tests did not run your worktree's code, they imported "
            + "; ".join(report.foreign_imports[:3])
        )
    return "\n".join([*lines, *_details(report)])


def _details(report: TestReport) -> list[str]:
    lines: list[str] = []
    if report.detailed and report.failed:
        failed = sorted(report.failed)
        lines.append(f"failing ({len(failed)}):")
        for name in failed[:MAX_FAILING]:
            shown = first_lines(report.failures.get(name, ""))
            lines.append(f"- {name}" + (f": {shown}" if shown else "").replace("\n", "\n  "))
        if len(failed) > MAX_FAILING:
            lines.append(f"- ... {len(failed) - MAX_FAILING} more")
    elif not report.detailed or report.timed_out or report.problem:
        if report.problem:
            lines.append(f"problem: {report.problem}")
        tail = report.output.strip()[-OUTPUT_TAIL_CHARS:]
        if tail:
            lines.append(f"end of the output:\n{tail}")
    return lines
