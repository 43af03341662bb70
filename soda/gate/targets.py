"""Target tests: the tests a plan task names as proof that it is done, and the
tests a spec's acceptance criteria name, found in a test run's per-test results.

A target is written as a person or a planner writes a test: a pytest node id
(`tests/test_x.py::TestY::test_z[1]`), a test file or directory
(`tests/test_x.py`), or a bare test name (`test_z`). A run's report names tests
as its runner does (pytest's JUnit report: `tests.test_x.TestY::test_z[1]`).
Both are read as a path of segments (directories, the file without its
extension, classes, the test) with an optional parameter part; a target covers
every test whose segments contain the target's, in order and side by side (a
file covers its tests, a test without parameters covers each of its
parametrizations). Only names are compared, so this works for any runner whose
per-test results the gate reads.

`judge` says, for each target, whether it passed: at least one test it covers
passed and none failed. A target that covers no test of the run (it does not
exist, or was not collected) and one whose tests were all skipped do not pass.
`spec_criteria` finds the tests each acceptance criterion of a spec names, and
`proof` judges them on a run (what DONE's confirmation shows).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from soda.gate.runner import TestReport

PASSED = "passed"
FAILED = "failed"
SKIPPED = "skipped"
NOT_FOUND = "not found"

EXTENSIONS = frozenset(
    {"py", "pyi", "js", "jsx", "mjs", "cjs", "ts", "tsx", "mts", "go", "rs", "rb", "java"}
)
"""File extensions dropped from a target's or a test name's path: pytest's report
names a module, not its file."""
TEST_DIRS = frozenset({"tests", "test", "__tests__", "spec"})
"""Directories a backquoted path in a criterion names as tests."""
MAX_OUTPUT = 1500
"""Characters of a failing target's output kept (the first lines of each failure)."""
MAX_COVERED = 5
"""Tests named under one target in its verdict."""


@dataclass(frozen=True)
class TargetResult:
    """One target test as a run found it."""

    target: str
    status: str
    """passed, failed, skipped or not found."""
    tests: tuple[str, ...] = ()
    """The run's tests the target covers (at most MAX_COVERED)."""
    output: str = ""
    """For failed: the failures' first lines; for the others, what happened."""

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    def to_json(self) -> dict[str, object]:
        return {"target": self.target, "status": self.status, "tests": list(self.tests)}


def segments(name: str, written: bool = True) -> tuple[tuple[str, ...], str]:
    """A test name or target as (its segments, its parameter part or ""). A
    file's extension is dropped from what a person or planner `written` (a
    target), and from a runner's name only where it is a path (with a slash):
    a report's dotted module may end like an extension (`pkg.rs`)."""
    name = name.strip().strip("`").rstrip("/")
    params = ""
    if name.endswith("]") and "[" in name:
        at = name.index("[")
        name, params = name[:at], name[at:]
    location, _, rest = name.partition("::")
    head, dot, extension = location.rpartition(".")
    is_path = written or "/" in location or "\\" in location
    if dot and extension in EXTENSIONS and head and is_path:
        location = head
    parts = [p for p in re.split(r"[/\\.]", location) if p]
    parts += [p for p in rest.split("::") if p]
    return tuple(parts), params


def covers(target: str, test: str) -> bool:
    """Whether `target` names `test` (see the module's docstring)."""
    want, want_params = segments(target)
    have, have_params = segments(test, written=False)
    if not want:
        return False
    size = len(want)
    for start in range(len(have) - size + 1):
        if have[start : start + size] == want:
            at_end = start + size == len(have)
            if not want_params or (at_end and want_params == have_params):
                return True
    return False


def inherited(target: str, test: str) -> bool:
    """Whether `target`, a test of a class (`tests/test_x.py::Mixin::test_y`),
    names `test` as run in another class of the same module: a mixin's or a
    base class's tests are reported under the classes that inherit them
    (`tests.test_x.TestHeir::test_y`), never under the class that defines them."""
    location = target.strip().strip("`").partition("::")[0]
    module = segments(location)[0]
    want, params = segments(target)
    if len(want) - len(module) < 2:  # no class named
        return False
    have, have_params = segments(test, written=False)
    size = len(want)
    for start in range(len(have) - size + 1):
        window = have[start : start + size]
        if window[: len(module)] == module and window[-1] == want[-1]:
            at_end = start + size == len(have)
            if not params or (at_end and params == have_params):
                return True
    return False


def judge_one(report: TestReport, target: str) -> TargetResult:
    """`target` on `report` (a run with per-test results); a test of a class the
    run never reports (a mixin) is judged by its runs in the classes that
    inherit it (`inherited`)."""
    every = sorted(report.passed | report.failed | report.skipped)
    covered = [name for name in every if covers(target, name)]
    if not covered:
        covered = [name for name in every if inherited(target, name)]
    shown = tuple(covered[:MAX_COVERED])
    failed = [name for name in covered if name in report.failed]
    if failed:
        text = "\n".join(
            f"{name}: {report.failures.get(name, '').strip() or 'failed'}" for name in failed
        )
        return TargetResult(target, FAILED, tuple(failed[:MAX_COVERED]), text[:MAX_OUTPUT])
    if any(name in report.passed for name in covered):
        return TargetResult(target, PASSED, shown)
    if covered:
        return TargetResult(target, SKIPPED, shown, "skipped: it did not run")
    return TargetResult(
        target, NOT_FOUND, (), "not found: no test of the run has this name (not written, "
        "misnamed, or not collected)",
    )  # fmt: skip


def judge(report: TestReport, targets: list[str] | tuple[str, ...]) -> list[TargetResult]:
    """Each target (duplicates once) on `report`, in the order given."""
    return [
        judge_one(report, target) for target in dict.fromkeys(t.strip() for t in targets) if target
    ]


def listing(results: list[TargetResult]) -> str:
    """The targets that did not pass, for one line: `name (status)`, ..."""
    return ", ".join(f"{r.target} ({r.status})" for r in results if not r.passed)


# --- the spec's acceptance criteria ------------------------------------------

_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*)$")
_CRITERIA_HEADING = re.compile(r"acceptance|criteri|done when", re.IGNORECASE)
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?(.*\S)\s*$")
_CODE = re.compile(r"`([^`\n]+)`")
_NODE_ID = re.compile(r"(?<![\w/.-])([\w./-]+\.\w+::[\w:\[\].,-]+)")
_TEST_NAME = re.compile(r"^(?:test_\w+|Test\w+)(?:\[[^\]]*\])?$")


@dataclass(frozen=True)
class Criterion:
    """One acceptance criterion of the spec and the tests it names."""

    text: str
    tests: tuple[str, ...]


def spec_criteria(spec: str) -> list[Criterion]:
    """The list items under the spec's acceptance-criteria headings (a heading
    that says "acceptance", "criteria" or "done when"; an item may go on over
    indented lines), each with the tests it names: node ids anywhere in it,
    and, in backquotes, test files or directories (`tests/test_x.py`,
    `x_test.go`, `tests/`) and test names (`test_x`, `TestX`)."""
    items: list[list[str]] = []
    level = 0  # inside a criteria section of this heading level; 0: outside
    going_on = False  # the last line was part of an item
    for line in spec.splitlines():
        heading = _HEADING.match(line)
        if heading:
            depth = len(heading.group(1))
            if level and depth <= level:
                level = 0
            if not level and _CRITERIA_HEADING.search(heading.group(2)):
                level = depth
            going_on = False
            continue
        item = _ITEM.match(line) if level else None
        if item:
            items.append([item.group(1)])
            going_on = True
        elif going_on and line[:1].isspace() and line.strip():
            items[-1].append(line.strip())
        else:
            going_on = False
    texts = (" ".join(lines) for lines in items)
    return [Criterion(text, _named_tests(text)) for text in texts]


def _named_tests(text: str) -> tuple[str, ...]:
    found = [match.group(1).rstrip(".,;:") for match in _NODE_ID.finditer(text)]
    for code in _CODE.findall(text):
        code = code.strip()
        if " " in code or code in found:
            continue
        if "::" in code or _TEST_NAME.match(code) or _is_test_path(code):
            found.append(code)
    return tuple(dict.fromkeys(found))


def _is_test_path(code: str) -> bool:
    """A test directory, or a file of code named or placed like a test."""
    parts = [part for part in code.split("/") if part]
    if not parts or code.startswith(("/", "-")):
        return False
    *dirs, name = parts
    if code.endswith("/") or "." not in name:
        return name in TEST_DIRS
    stem, _, extension = name.rpartition(".")
    if extension not in EXTENSIONS:
        return False
    named = stem.startswith("test_") or stem.endswith(("_test", ".test", ".spec", "Test"))
    return named or any(part in TEST_DIRS for part in dirs)


@dataclass(frozen=True)
class CriterionProof:
    """A criterion and how the tests it names fared."""

    criterion: str
    tests: tuple[TargetResult, ...]

    @property
    def proven(self) -> bool:
        return bool(self.tests) and all(result.passed for result in self.tests)

    def to_json(self) -> dict[str, object]:
        return {
            "criterion": self.criterion,
            "proven": self.proven,
            "tests": [result.to_json() for result in self.tests],
        }


def proof(report: TestReport, spec: str) -> list[CriterionProof]:
    """Each acceptance criterion of `spec` with the tests it names judged on
    `report` (a criterion naming no test has none: nothing in the spec ties it)."""
    return [
        CriterionProof(criterion.text, tuple(judge(report, criterion.tests)))
        for criterion in spec_criteria(spec)
    ]


def proof_lines(entries: list[dict[str, object]], indent: str = "  ") -> list[str]:
    """A recorded proof (`CriterionProof.to_json` rows) for a person, one line per
    criterion: what proves it, or that the spec names no test for it."""
    lines = []
    for entry in entries:
        tests = entry.get("tests")
        rows = tests if isinstance(tests, list) else []
        named = ", ".join(
            f"{row.get('target')} {row.get('status')}" for row in rows if isinstance(row, dict)
        )
        lines.append(f"{indent}- {entry.get('criterion')}: {named or 'no test named in the spec'}")
    return lines
