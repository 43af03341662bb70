"""The compact claims text agents read: no indentation, short SHAs, nothing
null or empty, and every value of the claims still there."""

from __future__ import annotations

import re
from pathlib import Path

from soda.contracts import Claims, LastAct, TaskAttempt, TestFailure, TestsBrief
from soda.loop.sense import sense
from soda.trace import SqliteTracker
from tests.test_sense import setup


def claims_of(repo: Path, tmp_path: Path) -> Claims:
    inp, db = setup(repo, tmp_path, commits=3)
    tracker = SqliteTracker(db, "spec")
    root = tracker.create("Spec")
    task = tracker.create("Add divide", parent_id=root.id)
    tracker.comment(task.id, "executor", "divide needs a\nzero check")
    blocked = tracker.create("Publish", parent_id=root.id)
    tracker.block(blocked.id, "needs a token")
    claims = sense(inp)
    failure = TestFailure(test="tests/test_calc.py::test_div", first_lines="AssertionError\n1 != 2")
    project = claims.project.model_copy(
        update={
            "learnings": ["L1: tests run with pytest -q"],
            "last_act": LastAct(
                iteration=7,
                intent="add divide",
                outcome="gate_failed",
                detail="1 test newly failing",
                tests="3 passed, 1 failed (exit 1)",
                failing=[failure],
                failing_total=1,
                diffstat="1 files changed, +2 -1\ncalc.py | +2 -1",
                tasks=[
                    TaskAttempt(task_id=2, title="Add divide", status="completed", summary="did it")
                ],
            ),
        }
    )
    code = claims.code.model_copy(
        update={
            "tests": TestsBrief(
                commit=claims.code.head[:10],
                summary="3 passed, 1 failed",
                failing=[failure],
                failing_total=4,
            )
        }
    )
    return claims.model_copy(update={"project": project, "code": code})


def leaves(value: object) -> list[object]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in leaves(item)]
    return [value]


def test_claims_text_is_compact_and_keeps_every_value(repo: Path, tmp_path: Path) -> None:
    claims = claims_of(repo, tmp_path)
    text = claims.prompt_text()
    dumped = claims.model_dump(mode="json")
    # No JSON: no braces, no quoted keys, no nulls, no indentation but the two
    # spaces that continue a multi-line value.
    assert "{" not in text and '":' not in text and "null" not in text and "None" not in text
    assert not [line for line in text.splitlines() if line.startswith("   ")]
    # SHAs are cut to 10 characters.
    assert not re.search(r"\b[0-9a-f]{11,}\b", text)
    assert claims.code.head[:10] in text and claims.code.base_commit[:10] in text
    # A failing total is told as how many more fail than are listed (4 in all,
    # 1 listed); every other value is there (SHAs short, multi-line values line
    # by line).
    assert "- ... 3 more failing" in text
    del dumped["code"]["tests"]["failing_total"], dumped["project"]["last_act"]["failing_total"]
    for leaf in leaves(dumped):
        if leaf is None or leaf == "" or isinstance(leaf, bool):
            continue
        shown = f"{leaf:g}" if isinstance(leaf, float) else str(leaf)
        if re.fullmatch(r"[0-9a-f]{40}", shown):
            shown = shown[:10]
        for line in shown.splitlines():
            assert line.strip() in text, line
    assert "DETECTED" not in text and "loop: no" in text
    # Much shorter than the JSON agents were given before.
    assert len(text) < len(claims.model_dump_json(indent=2)) / 2


def test_volatile_values_come_last(repo: Path, tmp_path: Path) -> None:
    text = claims_of(repo, tmp_path).prompt_text()
    assert text.index("### learnings") < text.index("### tasks") < text.index("### code (git)")
    assert text.rindex("head: ") > text.index("### code (git)")
    assert text.index("### this iteration") > text.index("head: ")


def test_the_parts_go_from_what_lasts_to_what_changes_every_iteration(
    repo: Path, tmp_path: Path
) -> None:
    claims = claims_of(repo, tmp_path)
    learned, standing, changing = claims.prompt_parts()
    assert claims.prompt_text() == "\n\n".join((learned, standing, changing))
    assert learned == "### learnings (newest first)\n- L1: tests run with pytest -q"
    # The standing work: the root and the unfinished tasks, and the tests that
    # fail on the tip (they stand until fixed; the run's commit and counts do not).
    assert standing.startswith("### tasks (Trace)\nroot (the spec): #1 Spec [open]\nopen:\n")
    assert "blocked:\n- #3 Publish (parent #1) - needs a token" in standing
    assert "### tests failing on the milestone tip" in standing
    assert "- tests/test_calc.py::test_div: AssertionError\n  1 != 2\n- ... 3 more" in standing
    assert claims.code.head[:10] not in standing and "3 passed" not in standing
    # Everything that moves with an iteration comes after: the comments, the
    # history, the code with its head, and last the iteration's number and budget.
    assert changing.startswith("### tasks (Trace), lately\ncomments (newest first):\n- #2")
    assert f"tests at {claims.code.head[:10]}: 3 passed, 1 failed (the failing ones" in changing
    assert changing.index("### last attempt") < changing.index("### code (git)")
    assert changing.rindex("### this iteration") > changing.index("head: ")
