"""`run_tests`: the project's tests on a clean checkout of the milestone tip, for
ORIENT's agents, so that "spec met" rests on results and not only on reading.

The run goes through the gate's cached path (`soda.gate.tested`): results are
kept by tree id, so a second call, another agent's call, and ACT's baseline on
the same tip cost nothing. The answer is bounded: counts, then the failing
tests with the first lines of each failure (soda.gate.evidence's bounds), or why
there is no per-test report and the end of the output.
"""

from __future__ import annotations

from collections.abc import Callable

from soda.gate.evidence import MAX_FAILING, first_lines
from soda.gate.runner import TestReport
from soda.llm.base import ToolSpec
from soda.tools.toolbox import Tool, object_schema

TestRun = Callable[[], tuple[TestReport, bool]]
"""Runs (or finds cached) the tip's tests: the report, and whether it was cached."""
OUTPUT_TAIL_CHARS = 1500
"""Of the test command's output, when there is no per-test report to show."""


def test_tools(run: TestRun, commit: str) -> list[Tool]:
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
    """The bounded answer for one run."""
    source = "cached: this tree was tested before" if cached else "ran now"
    lines = [f"tests at {commit[:10]} ({source}): {report.summary()}"]
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
    return "\n".join(lines)
