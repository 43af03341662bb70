"""Running the project's tests and judging the result: the gate behind every merge.

When the test command is pytest (the common case) soda asks it for a JUnit XML
report through PYTEST_ADDOPTS and compares individual tests; otherwise it only
has the exit code and fails closed. The rule: merge only if no test that passed
at baseline fails (or disappears) afterwards.
"""

from __future__ import annotations

import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from soda.config import Config
from soda.proc import run


@dataclass(frozen=True)
class TestReport:
    __test__ = False  # not a pytest test class

    returncode: int | None
    timed_out: bool
    passed: frozenset[str] = field(default_factory=frozenset)
    failed: frozenset[str] = field(default_factory=frozenset)
    detailed: bool = False
    """True when per-test results were available (JUnit XML)."""
    output: str = ""

    def summary(self) -> str:
        if self.timed_out:
            return "test command timed out"
        if self.detailed:
            return f"{len(self.passed)} passed, {len(self.failed)} failed (exit {self.returncode})"
        return f"exit code {self.returncode} (no per-test report)"


@dataclass(frozen=True)
class GateResult:
    ok: bool
    reason: str
    regressions: tuple[str, ...] = ()


def run_tests(config: Config, cwd: Path) -> TestReport:
    """Run the configured test command in `cwd` and collect per-test results."""
    with tempfile.TemporaryDirectory(prefix="soda-junit-") as tmp:
        xml_path = Path(tmp) / "report.xml"
        result = run(
            config.project.test_command,
            cwd=cwd,
            timeout=config.act.command_timeout,
            output_limit=config.act.output_limit,
            extra_env={"PYTEST_ADDOPTS": f"--junit-xml={xml_path} -p no:cacheprovider"},
        )
        passed, failed, detailed = _parse_junit(xml_path)
    return TestReport(
        returncode=result.returncode,
        timed_out=result.timed_out,
        passed=passed,
        failed=failed,
        detailed=detailed,
        output=result.output,
    )


def _parse_junit(path: Path) -> tuple[frozenset[str], frozenset[str], bool]:
    if not path.is_file():
        return frozenset(), frozenset(), False
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        return frozenset(), frozenset(), False
    passed, failed = set(), set()
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcomes = {child.tag for child in case}
        if outcomes & {"failure", "error"}:
            failed.add(name)
        elif "skipped" not in outcomes:
            passed.add(name)
    return frozenset(passed), frozenset(failed), True


def gate(baseline: TestReport, after: TestReport) -> GateResult:
    """Fail closed: merge only when nothing that passed at baseline now fails."""
    if after.timed_out:
        return GateResult(False, "tests timed out after the change")
    if baseline.detailed and after.detailed:
        regressions = tuple(sorted(baseline.passed - after.passed))
        if regressions:
            shown = ", ".join(regressions[:5]) + (" ..." if len(regressions) > 5 else "")
            return GateResult(
                False,
                f"{len(regressions)} test(s) passed before and fail now: {shown}",
                regressions,
            )
        return GateResult(True, f"no regressions ({after.summary()})")
    if after.returncode == 0:
        return GateResult(True, "test command passed")
    return GateResult(
        False, f"test command failed with exit code {after.returncode} and gave no per-test report"
    )
