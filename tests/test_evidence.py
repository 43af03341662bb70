"""Evidence for ORIENT on a real project: `run_tests` (the tip's tests through the
gate's cache: a second call runs nothing) and the claims after a failed attempt
(`last_act`: outcome, failing tests with their first lines, the executor's
summary, the diffstat; the tip's last test result)."""

from __future__ import annotations

import json
from pathlib import Path

from soda.llm.base import ModelRequest
from soda.llm.function import Reply, call, submit
from soda.loop.run import run_loop
from tests.plan_fakes import (
    NOT_MET,
    VERIFIED,
    done,
    fake_model,
    new_project,
    open_session,
    plan,
    recording,
    task,
)


def tool_results(request: ModelRequest) -> list[str]:
    return [r.content for m in request.messages for r in m.tool_results]


def test_run_tests_runs_once_per_tree_and_answers_from_the_cache(tmp_path: Path) -> None:
    seen: dict[str, list[str]] = {}

    def tests_twice(name: str, answer: dict) -> object:
        def respond(request: ModelRequest) -> Reply:
            results = tool_results(request)
            seen[name] = results
            if len(results) < 2:
                return call("run_tests")
            return submit(answer)

        return respond

    model = fake_model(
        None,
        verifier=tests_twice("verifier", VERIFIED),
        assessor=tests_twice("assessor", NOT_MET),
    )
    session = open_session(new_project(tmp_path), model)
    run_loop(session, lambda line: None, once=True)
    first, second = seen["verifier"]
    assert "(ran now)" in first and "(cached: this tree was tested before)" in second
    assert all("(cached" in text for text in seen["assessor"])
    # The demo's acceptance tests fail on the tip: named, with their first lines.
    assert "3 failed" in first and "test_acceptance::test_divide: " in first
    assert first.split("): ", 1)[1] == second.split("): ", 1)[1]  # the same report
    # One run in all: one row in the cache, written by the first call.
    rows = session.db.execute("SELECT count(*) FROM test_results").fetchone()[0]
    assert rows == 1


def test_after_a_gate_failure_the_claims_carry_the_attempt(tmp_path: Path) -> None:
    def breaks_add(request: ModelRequest) -> Reply:
        if not tool_results(request):
            return call("edit_file", path="calc.py", old="return a + b", new="return a - b")
        return done("rewrote add to use subtraction")

    firsts: list[str] = []
    model = fake_model(
        plan(task("a", title="Rewrite add"), intent="rewrite add"),
        executor=breaks_add,
        verifier=recording(lambda request: submit(VERIFIED), firsts),
    )
    root = new_project(tmp_path)
    session = open_session(root, model)
    run_loop(session, lambda line: None, once=True)
    run_loop(session, lambda line: None, once=True)
    outcomes = [r[0] for r in session.db.execute("SELECT outcome FROM iterations ORDER BY id")]
    assert outcomes[0] == "gate_failed"
    claims = json.loads(
        session.db.execute("SELECT claims_json FROM iterations ORDER BY id").fetchall()[1][0]
    )
    act = claims["project"]["last_act"]
    assert act["iteration"] == 1 and act["outcome"] == "gate_failed"
    assert act["intent"] == "rewrite add"
    failing = {f["test"]: f["first_lines"] for f in act["failing"]}
    assert any("test_add" in name for name in failing)
    assert all(len(text) <= 303 and text.count("\n") < 3 for text in failing.values())
    assert any("assert" in text.lower() for text in failing.values())
    assert act["tasks"][0]["summary"] == "rewrote add to use subtraction"
    assert act["tasks"][0]["status"] in ("completed", "failed")  # as ACT recorded it
    assert act["diffstat"].startswith("[a] ") and "calc.py |" in act["diffstat"]
    assert act["tests"]  # the gate's summary after the change
    # The tip (unchanged) was tested by ACT's baseline: its result is in the claims.
    tests = claims["code"]["tests"]
    assert tests["commit"] == claims["code"]["head"][:10]
    assert "failed" in tests["summary"] and tests["failing_total"] >= 1
    # And the verifier of iteration 2 read it all, in the compact text.
    text = firsts[1]
    assert "### last attempt (ACT)" in text and "iteration 1: gate_failed" in text
    assert "rewrote add to use subtraction" in text and "calc.py |" in text
    assert claims["code"]["head"] not in text  # SHAs are short in prompts
