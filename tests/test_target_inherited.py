"""A target test defined in a mixin or a base class: pytest reports it under the
classes that inherit it, never under the class that defines it, so a target
naming the defining class is judged by those runs. Read from a real pytest
run's JUnit report."""

from __future__ import annotations

import subprocess
import sys

import pytest

from soda.gate.reports import Parsed, parse_junit
from soda.gate.runner import TestReport
from soda.gate.targets import covers, inherited, judge

MODULE = """\
class CacheMixin:
    def test_get(self):
        assert self.cache.get("k") is None

    def test_put(self):
        self.cache["k"] = 1
        assert self.cache.get("k") == self.expected


class TestMemory(CacheMixin):
    cache: dict = {}
    expected = 1


class TestBroken(CacheMixin):
    cache: dict = {}
    expected = 2


class TestOther:
    def test_get(self):
        pass
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> TestReport:
    root = tmp_path_factory.mktemp("mixins")
    (root / "tests").mkdir()
    (root / "tests" / "__init__.py").write_text("")
    (root / "tests" / "test_cache.py").write_text(MODULE)
    report = root / "report.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         f"--junit-xml={report}", "tests"],
        cwd=root, capture_output=True, timeout=120,
    )  # fmt: skip
    parsed = parse_junit(report)
    assert isinstance(parsed, Parsed), parsed
    return TestReport(1, False, parsed.passed, parsed.failed, True, failures=parsed.excerpts)


def test_pytest_names_a_mixins_tests_after_the_classes_that_run_them(run: TestReport) -> None:
    assert "tests.test_cache.TestMemory::test_put" in run.passed
    assert "tests.test_cache.TestBroken::test_put" in run.failed
    assert not any("CacheMixin" in name for name in run.passed | run.failed)


def test_a_target_in_a_mixin_is_judged_by_its_heirs(run: TestReport) -> None:
    results = {
        r.target: r
        for r in judge(
            run,
            [
                "tests/test_cache.py::CacheMixin::test_get",
                "tests/test_cache.py::CacheMixin::test_put",
                "tests/test_cache.py::CacheMixin::test_gone",
                "tests/test_cache.py::TestMemory::test_put",
            ],
        )
    }
    get = results["tests/test_cache.py::CacheMixin::test_get"]
    assert get.status == "passed"
    assert "tests.test_cache.TestMemory::test_get" in get.tests
    put = results["tests/test_cache.py::CacheMixin::test_put"]  # one heir fails: it fails
    assert put.status == "failed" and put.tests == ("tests.test_cache.TestBroken::test_put",)
    assert results["tests/test_cache.py::CacheMixin::test_gone"].status == "not found"
    # a class the run does report keeps its own tests: no stand-ins
    assert results["tests/test_cache.py::TestMemory::test_put"].tests == (
        "tests.test_cache.TestMemory::test_put",
    )


def test_only_the_same_module_and_test_name_stand_in() -> None:
    test = "tests.test_cache.TestMemory::test_get[1]"
    assert inherited("tests/test_cache.py::CacheMixin::test_get", test)
    assert inherited("tests/test_cache.py::CacheMixin::test_get[1]", test)
    assert not inherited("tests/test_cache.py::CacheMixin::test_get[2]", test)
    assert not inherited("tests/test_other.py::CacheMixin::test_get", test)
    assert not inherited("tests/test_cache.py::CacheMixin::test_put", test)
    assert not inherited("tests/test_cache.py::test_get", test)  # no class: covers' rule
    assert not covers("tests/test_cache.py::CacheMixin::test_get", test)
