"""bench/replay.py on a tiny generated project: its one real fix merges
unattended through soda's real loop and gate (real jail, real pytest runs), and
none of its four corrupted variants merges; each is stopped by the rule meant
for it."""

from __future__ import annotations

import sys
from pathlib import Path

from bench.replay import run
from bench.replay_commits import (
    DELETED_TEST,
    FORCED_PASS,
    REAL,
    TESTS_ONLY,
    UNRELATED_BREAK,
    pick_commits,
)
from tests.conftest import git

CALC = """\
def add(a, b):
    return a + b


def halve(n):
    return n // 2
"""
FIXED = CALC.replace("return n // 2", "return n / 2")
TESTS = """\
from calc import add, halve


def test_add():
    assert add(2, 3) == 5


def test_add_negative():
    assert add(-2, -3) == -5


def test_halve_even():
    assert halve(4) == 2
"""
NEW_TEST = """

def test_halve_odd():
    assert halve(3) == 1.5
"""


def project(root: Path) -> Path:
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "calc.py").write_text(CALC)
    (root / "tests").mkdir()
    (root / "tests" / "test_calc.py").write_text(TESTS)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "calc with add and halve")
    (root / "calc.py").write_text(FIXED)
    (root / "tests" / "test_calc.py").write_text(TESTS + NEW_TEST)
    git(root, "commit", "-q", "-am", "Fix halve for odd numbers\n\nhalve(3) was 1.")
    return root


def test_the_real_fix_merges_and_no_corrupted_variant_does(tmp_path: Path) -> None:
    root = project(tmp_path / "calc")
    [commit] = pick_commits(root, 5)  # the first commit has no parent: not a task
    assert commit.targets == ["tests/test_calc.py::test_halve_odd"]

    lines: list[str] = []
    result = run(root, tmp_path / "work", 5, say=lines.append, python=sys.executable)

    rows = {row["variant"]: row for row in result["rows"]}
    assert set(rows) == {REAL, TESTS_ONLY, DELETED_TEST, FORCED_PASS, UNRELATED_BREAK}, lines
    assert (result["commits"], result["merged"]) == (1, 1), lines
    assert (result["corrupted"], result["corrupted_merged"], result["inert"]) == (4, 0, 0), lines
    assert rows[TESTS_ONLY]["refusal"] == "targets", rows[TESTS_ONLY]
    assert rows[DELETED_TEST]["rules"] == ["missing-test"], rows[DELETED_TEST]
    assert "test-config:conftest.py" in rows[FORCED_PASS]["rules"], rows[FORCED_PASS]
    assert rows[UNRELATED_BREAK]["refusal"] == "regression", rows[UNRELATED_BREAK]
    assert "test_add" in rows[UNRELATED_BREAK]["reason"], rows[UNRELATED_BREAK]
    # The real fix is on its milestone; the person's checkout is untouched.
    clone = tmp_path / "work" / "repo"
    merged = rows[REAL]["merged_commit"]
    assert git(clone, "rev-parse", f"soda/r-{commit.short}-real") == merged
    assert "n / 2" in git(clone, "show", f"{merged}:calc.py")
    assert git(root, "status", "--porcelain") == ""
