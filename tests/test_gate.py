"""The gate's rules (table-driven) and what it reads from git: test-infrastructure
changes and the project's own modules, on real repositories."""

from __future__ import annotations

from pathlib import Path

import pytest
from git import Repo

from soda.gate.reports import Parsed as JUnit
from soda.gate.reports import parse_junit as _parse_junit
from soda.gate.rules import gate, infrastructure_changes, own_modules
from soda.gate.runner import TestReport
from tests.conftest import git


def report(passed: set[str], failed: set[str] = frozenset(), **kw: object) -> TestReport:
    return TestReport(1 if failed else 0, False, frozenset(passed), frozenset(failed), True, **kw)


def test_a_new_failing_test_is_refused_like_a_regression() -> None:
    verdict = gate(report({"a"}), report({"a"}, {"new"}))
    assert not verdict.ok
    assert not verdict.approval  # not a person's call: refused
    assert "fail after the change that did not fail before: new" in verdict.reason


def test_a_test_failing_at_baseline_may_still_fail() -> None:
    assert gate(report({"a"}, {"b"}), report({"a"}, {"b"})).ok


def test_a_missing_or_skipped_test_needs_a_person() -> None:
    verdict = gate(report({"a", "b"}), report({"a"}, skipped=frozenset({"b"})))
    assert not verdict.ok
    assert verdict.approval == ("test passed before, missing or skipped now: b",)
    assert "needs a person's approval" in verdict.reason


def test_infrastructure_changes_need_a_person_even_when_tests_pass() -> None:
    verdict = gate(report({"a"}), report({"a"}), infrastructure=("tests/conftest.py",))
    assert not verdict.ok
    assert verdict.approval == ("changes test infrastructure: tests/conftest.py",)


@pytest.mark.parametrize("label", ["at baseline", "after the change"])
def test_a_missing_report_is_refused_when_it_was_asked_for(label: str) -> None:
    missing = TestReport(0, False, problem="no per-test report: report.xml was not written")
    baseline, after = (
        (missing, report({"a"})) if label == "at baseline" else (report({"a"}), missing)
    )
    verdict = gate(baseline, after, mandatory=True)
    assert not verdict.ok
    assert "report.xml was not written" in verdict.reason
    assert label in verdict.reason


def test_tests_that_import_the_project_from_elsewhere_are_refused() -> None:
    foreign = report({"a"}, foreign_imports=("mypkg from /elsewhere/mypkg/__init__.py",))
    verdict = gate(report({"a"}), foreign)
    assert not verdict.ok
    assert "did not run the checkout's code" in verdict.reason
    assert "mypkg from /elsewhere" in verdict.reason


def test_junit_parsing_keeps_failure_excerpts_and_rejects_garbage(tmp_path: Path) -> None:
    xml = tmp_path / "r.xml"
    xml.write_text(
        '<testsuites><testsuite><testcase classname="t" name="ok"/>'
        '<testcase classname="t" name="bad"><failure message="assert 1 == 2">long</failure>'
        '</testcase><testcase classname="t" name="sk"><skipped/></testcase>'
        "</testsuite></testsuites>"
    )
    parsed = _parse_junit(xml)
    assert isinstance(parsed, JUnit)
    assert (parsed.passed, parsed.failed, parsed.skipped) == ({"t::ok"}, {"t::bad"}, {"t::sk"})
    assert parsed.excerpts == {"t::bad": "assert 1 == 2\nlong"}
    assert "suite name is wrong" in _parse_junit(xml, nonce="soda-1234")  # type: ignore[operator]
    xml.write_text("")
    assert "empty" in _parse_junit(xml)  # type: ignore[operator]
    xml.write_text("<html>")
    assert "not valid XML" in _parse_junit(xml)  # type: ignore[operator]
    assert "was not written" in _parse_junit(tmp_path / "none.xml")  # type: ignore[operator]


def commit(repo: Path, files: dict[str, str], message: str = "c") -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def test_infrastructure_changes_name_the_files(repo: Path) -> None:
    old = commit(
        repo,
        {
            "pyproject.toml": '[project]\nname = "p"\n[tool.pytest.ini_options]\naddopts = "-q"\n',
            "src/p/__init__.py": "",
        },
    )
    r = Repo(repo)
    harmless = commit(
        repo,
        {
            "pyproject.toml": '[project]\nname = "p2"\n[tool.pytest.ini_options]\naddopts = "-q"\n',
            "src/p/x.py": "x = 1\n",
        },
    )
    assert infrastructure_changes(r, old, harmless, []) == ()
    sneaky = commit(
        repo,
        {
            "pyproject.toml": '[project]\nname = "p2"\n'
            '[tool.pytest.ini_options]\naddopts = "-q -p no:junitxml"\n',
            "tests/conftest.py": "",
            "pytest.toml": "",
            "pytest.py": "",
            "tests/test_x.py": "import atexit\n",
            "notes.md": "junit and atexit, in prose\n",
            "soda.toml": "",
            "docs/notes.md": "",
        },
    )
    found = infrastructure_changes(r, harmless, sneaky, ["soda.toml"])
    assert set(found) == {
        "pyproject.toml (test runner section)",
        "tests/conftest.py",
        "pytest.toml",
        "pytest.py",
        "soda.toml",
        "tests/test_x.py (mentions atexit)",
        "pyproject.toml (mentions junit)",
    }


def test_own_modules_cover_flat_and_src_layouts(repo: Path) -> None:
    head = commit(
        repo,
        {
            "src/mypkg/__init__.py": "",
            "flat.py": "",
            "other/__init__.py": "",
            "tests/__init__.py": "",
            "conftest.py": "",
            "deep/a/__init__.py": "",
        },
    )
    assert own_modules(Repo(repo), head) == {"mypkg", "flat", "other"}
