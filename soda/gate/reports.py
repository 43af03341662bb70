"""Per-test results read from each test runner's own machine-readable output.

Every parser returns the same `Parsed` (passed, failed, skipped, a bounded
excerpt of each failure), or a string saying what is wrong with the report, so
the gate's rules hold the same whatever ran the tests. A test's id names where
it lives, because titles repeat across files:

    JUnit XML (pytest, gate.junit)  classname::name
    go test -json (test2json)       import/path/TestName, subtests TestName/sub
    cargo test (libtest, libtest.py) bin/src/lib.rs::mod::test; doctests
                                    bin/doctest::src/x.rs - item (no line number,
                                    which changes whenever a line is added above)
    vitest --reporter=json, jest    file::describe > test (file relative to the root)
      --json (the same shape)
    mocha --reporter=json           file::full title
    node --test (soda's reporter)   file::describe > test

A file or package that failed as a whole (it did not build, or threw before
its tests ran) is one failed id of its own (`import/path (package)`,
`file::(file)`), so it counts as a failure, not as tests gone missing.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_FAILURE_LINES = 5
MAX_FAILURES_KEPT = 20


@dataclass(frozen=True)
class Parsed:
    """One run's per-test results."""

    passed: frozenset[str]
    failed: frozenset[str]
    skipped: frozenset[str]
    excerpts: dict[str, str]
    """First lines of each failure (bounded)."""
    missing_modules: frozenset[str] = frozenset()
    """Modules a failure says could not be imported (No module named 'x')."""


@dataclass
class _Results:
    """Outcomes collected by id; a later pass never hides an earlier failure."""

    outcomes: dict[str, str] = field(default_factory=dict)
    excerpts: dict[str, str] = field(default_factory=dict)

    def add(self, name: str, outcome: str, text: str = "") -> None:
        if self.outcomes.get(name) == "failed":
            return
        self.outcomes[name] = outcome
        if outcome == "failed" and len(self.excerpts) < MAX_FAILURES_KEPT:
            self.excerpts[name] = excerpt(text)

    def parsed(self, missing: Iterable[str] = ()) -> Parsed:
        by = {k: frozenset(n for n, o in self.outcomes.items() if o == k) for k in _OUTCOMES}
        return Parsed(by["passed"], by["failed"], by["skipped"], self.excerpts, frozenset(missing))


_OUTCOMES = ("passed", "failed", "skipped")


def excerpt(text: str) -> str:
    return "\n".join(text.strip().splitlines()[:MAX_FAILURE_LINES])[:500]


# --- JUnit XML ------------------------------------------------------------------------

_NO_MODULE = re.compile(r"No module named '([A-Za-z0-9_]+)")


def parse_junit(path: Path, nonce: str | None = None) -> Parsed | str:
    """Per-test results from a JUnit XML file, or a string saying what is wrong.
    With `nonce`, the report must carry it as its suite name (proof that pytest
    wrote it in this run, not code under test)."""
    problem = _unreadable(path)
    if problem:
        return problem
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        return f"{path.name} is not valid XML ({exc})"
    if root.tag not in ("testsuites", "testsuite"):
        return f"{path.name} is not a JUnit report (root element <{root.tag}>)"
    if nonce is not None:
        names = {suite.get("name") for suite in root.iter("testsuite")}
        if names != {nonce}:
            return f"{path.name} was not written by this test run (its suite name is wrong)"
    results, missing = _Results(), set()
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcomes = {child.tag: child for child in case}
        bad = outcomes.get("failure", outcomes.get("error"))
        if bad is not None:
            text = f"{bad.get('message') or ''}\n{bad.text or ''}".strip()
            missing.update(_NO_MODULE.findall(text))
            results.add(name, "failed", text)
        else:
            results.add(name, "skipped" if "skipped" in outcomes else "passed")
    return results.parsed(missing)


def _unreadable(path: Path) -> str | None:
    if not path.is_file():
        return f"{path.name} was not written (the run crashed, or the report was switched off)"
    if path.stat().st_size == 0:
        return f"{path.name} is empty"
    return None


# --- go test -json ----------------------------------------------------------------------

_GO_PLAIN_FAIL = re.compile(r"^FAIL\s+(\S+)\s+\[(build failed|setup failed)\]")


def parse_go(path: Path) -> Parsed | str:
    """test2json events (`go test -json`), one JSON object a line; the other lines
    (a package that did not build: `FAIL pkg [build failed]`) are read too."""
    problem = _unreadable(path)
    if problem:
        return problem
    results = _Results()
    output: dict[tuple[str, str], list[str]] = {}
    broken: dict[str, str] = {}
    seen = False
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        event = _json_line(line)
        if event is None:
            plain = _GO_PLAIN_FAIL.match(line)
            if plain:
                broken[plain.group(1)] = f"the package did not build ({plain.group(2)})"
            continue
        package, test = str(event.get("Package") or ""), str(event.get("Test") or "")
        action = event.get("Action")
        if not package:
            continue
        seen = True
        key = (package, test)
        if action == "output":
            kept = output.setdefault(key, [])
            if len(kept) < 40:
                kept.append(str(event.get("Output") or ""))
        elif action in ("pass", "fail", "skip") and test:
            outcome = {"pass": "passed", "fail": "failed", "skip": "skipped"}[str(action)]
            results.add(f"{package}/{test}", outcome, _go_failure(output.get(key, [])))
        elif action == "fail" and not test:
            broken.setdefault(package, "".join(output.get(key, [])) or "the package failed")
    for package, why in broken.items():
        failed = (n for n, o in results.outcomes.items() if o == "failed")
        if not any(n.startswith(f"{package}/") for n in failed):
            results.add(f"{package} (package)", "failed", why)
    if not seen and not broken:
        return f"{path.name} holds no test2json event (is -json on the go test command?)"
    return results.parsed()


def _go_failure(lines: list[str]) -> str:
    """A failed test's own output without test2json's framing lines."""
    kept = [ln for ln in lines if not ln.lstrip().startswith(("=== ", "--- "))]
    return "".join(kept)


def _json_line(line: str) -> dict[str, Any] | None:
    if not line.startswith("{"):
        return None
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


# --- vitest and jest (one JSON shape) ---------------------------------------------------


def parse_jest_json(path: Path, root: Path) -> Parsed | str:
    """jest's `--json` report, which vitest's json reporter also writes: one entry
    per test file, its tests with their describe blocks (`ancestorTitles`)."""
    data = _json_file(path)
    if isinstance(data, str):
        return data
    files = data.get("testResults")
    if not isinstance(files, list):
        return f"{path.name} is not a jest/vitest JSON report (no testResults)"
    results = _Results()
    for entry in files:
        if not isinstance(entry, dict):
            continue
        file = relative(str(entry.get("name") or entry.get("testFilePath") or ""), root)
        tests = [t for t in entry.get("assertionResults") or [] if isinstance(t, dict)]
        for test in tests:
            titles = [*(test.get("ancestorTitles") or []), test.get("title") or ""]
            status = str(test.get("status") or "")
            outcome = {"passed": "passed", "failed": "failed"}.get(status, "skipped")
            message = "\n".join(str(m) for m in test.get("failureMessages") or [])
            results.add(f"{file}::{' > '.join(map(str, titles))}", outcome, message)
        if entry.get("status") == "failed" and not any(
            t.get("status") == "failed" for t in tests
        ):  # the file failed as a whole (it did not load, a hook threw)
            results.add(f"{file}::(file)", "failed", str(entry.get("message") or "failed"))
    return results.parsed()


# --- mocha --reporter=json --------------------------------------------------------------


def parse_mocha_json(path: Path, root: Path) -> Parsed | str:
    """mocha's json reporter: `passes`, `failures` and `pending`, each test with
    its file and full title."""
    data = _json_file(path)
    if isinstance(data, str):
        return data
    if not isinstance(data.get("stats"), dict):
        return f"{path.name} is not a mocha JSON report (no stats)"
    results = _Results()
    for key, outcome in (("passes", "passed"), ("pending", "skipped"), ("failures", "failed")):
        for test in data.get(key) or []:
            if not isinstance(test, dict):
                continue
            file = relative(str(test.get("file") or ""), root)
            err = test.get("err")
            err = err if isinstance(err, dict) else {}
            text = f"{err.get('message') or ''}\n{err.get('stack') or ''}"
            results.add(f"{file}::{test.get('fullTitle') or test.get('title')}", outcome, text)
    return results.parsed()


# --- node --test (soda's own reporter) ---------------------------------------------------

NODE_REPORTER = """\
// soda's reporter for node --test: one JSON line per finished test or suite,
// with its file and the titles of the suites around it.
export default async function* soda(source) {
  const stacks = new Map();
  for await (const event of source) {
    const d = event.data ?? {};
    if (event.type === 'test:start') {
      const stack = stacks.get(d.file) ?? [];
      stack.length = d.nesting;
      stack.push(d.name);
      stacks.set(d.file, stack);
    } else if (event.type === 'test:pass' || event.type === 'test:fail') {
      const stack = stacks.get(d.file) ?? [];
      const error = d.details?.error;
      yield JSON.stringify({
        file: d.file ?? '',
        path: [...stack.slice(0, d.nesting), d.name],
        outcome: event.type === 'test:fail' ? 'failed'
          : (d.skip !== undefined || d.todo !== undefined) ? 'skipped' : 'passed',
        suite: d.details?.type === 'suite',
        kind: error?.failureType ?? null,
        message: error ? String(error.cause?.message ?? error.message ?? error).slice(0, 2000) : '',
      }) + '\\n';
    }
  }
}
"""
"""Written beside the report (outside the checkout) and named by path with
`--test-reporter`: node's own junit reporter names neither the file nor the
suites around a test."""


def parse_node_lines(path: Path, root: Path) -> Parsed | str:
    """The lines NODE_REPORTER wrote. A suite counts only when it failed for a
    reason of its own (a hook), not because a test in it failed."""
    problem = _unreadable(path)
    if problem:
        return problem
    results = _Results()
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        event = _json_line(line)
        if event is None or not isinstance(event.get("path"), list):
            continue
        outcome = str(event.get("outcome"))
        if event.get("suite") and (outcome != "failed" or event.get("kind") == "subtestsFailed"):
            continue
        file = relative(str(event.get("file") or ""), root)
        name = " > ".join(str(title) for title in event["path"])
        results.add(f"{file}::{name}", outcome, str(event.get("message") or ""))
    return results.parsed()


def relative(file: str, root: Path) -> str:
    """A test file's path relative to the repository root when it is under it."""
    path = Path(file)
    if path.is_absolute() and path.is_relative_to(root):
        return path.relative_to(root).as_posix()
    return file


def _json_file(path: Path) -> dict[str, Any] | str:
    problem = _unreadable(path)
    if problem:
        return problem
    try:
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except ValueError as exc:
        return f"{path.name} is not valid JSON ({exc})"
    return data if isinstance(data, dict) else f"{path.name} is not a JSON object"
