"""Bounded context: tool results clipped to [context] tool_result_chars, and an
executor session past [context] executor_session_tokens condensed, its latest
results kept whole. The model is a FunctionModel; the tools are real."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from soda.agent.definition import load_agent
from soda.agent.recorder import CallRecorder
from soda.agent.runtime import KEEP_WHOLE, AgentRunner
from soda.config import Config, ContextConfig, ModelConfig
from soda.events import Events
from soda.llm.base import ModelRequest, ToolSpec
from soda.llm.function import FunctionModel, call, first_turn, last_results, submit
from soda.store import Database, open_db
from soda.tools import read_only_tools
from soda.tools.sandbox import Sandbox

ASSESSMENT = {"spec_satisfied": False, "confidence": "high", "gaps": [], "summary": "s"}
ASSESSOR_INPUTS = {"spec": "# S", "claims": {}, "verification": "ok"}
RESULT_SIZE = 4000


class Numbered:
    """One tool, `fetch`, whose n-th result is RESULT_SIZE characters starting
    with the line `result n`."""

    def __init__(self) -> None:
        self.count = 0

    def specs(self) -> list[ToolSpec]:
        schema = {"type": "object", "properties": {}, "additionalProperties": False}
        return [ToolSpec("fetch", "fetch", schema)]

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        self.count += 1
        head = f"result {self.count}\n"
        return SimpleNamespace(content=head + "x" * (RESULT_SIZE - len(head)), is_error=False)


@pytest.fixture
def db(tmp_path: Path) -> Database:
    return open_db(tmp_path / "soda.db")


def runner(db: Database, model: FunctionModel, **context: Any) -> AgentRunner:
    config = Config(model=ModelConfig(max_turns=20), context=ContextConfig(**context))
    return AgentRunner(model, config, CallRecorder(db, config, "function", Events(db)))


def events(db: Database, kind: str) -> list[dict[str, Any]]:
    rows = db.execute("SELECT data_json FROM events WHERE kind = ? ORDER BY id", [kind])
    return [json.loads(row[0]) for row in rows]


def executor_inputs() -> dict[str, str]:
    return {name: f"({name})" for name in load_agent("executor").inputs}


# --- tool results are clipped --------------------------------------------------


def test_a_long_read_keeps_its_head_and_tail_with_a_note_of_the_cut(
    db: Database, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    lines = [f"line {n:05d} " + "y" * 40 for n in range(1, 1201)]  # about 58,000 characters
    (work / "big.txt").write_text("\n".join(lines) + "\n")
    seen: list[str] = []

    def answer(request: ModelRequest) -> dict[str, Any]:
        if first_turn(request):
            return call("read_file", path="big.txt", offset_line=None, max_lines=None)
        seen.extend(last_results(request))
        return submit(ASSESSMENT)

    tools = read_only_tools(Sandbox(work))
    runner(db, FunctionModel(answer), tool_result_chars=3000).run(
        load_agent("assessor"), ASSESSOR_INPUTS, tools
    )
    [shown] = seen
    assert shown.startswith("     1\tline 00001")  # the head
    assert shown.rstrip().endswith("y" * 40)  # the tail: the last line read
    assert "line 01200" in shown
    assert "line 00600" not in shown  # the middle is gone
    assert "characters cut here (a result shows at most 3,000)" in shown
    assert "read_file with offset_line and max_lines" in shown
    assert len(shown) < 3000 + 300


def test_a_result_within_the_limit_is_untouched(db: Database) -> None:
    seen: list[str] = []

    def answer(request: ModelRequest) -> dict[str, Any]:
        if first_turn(request):
            return call("fetch")
        seen.extend(last_results(request))
        return submit(ASSESSMENT)

    runner(db, FunctionModel(answer), tool_result_chars=RESULT_SIZE).run(
        load_agent("assessor"), ASSESSOR_INPUTS, Numbered()
    )
    assert seen == ["result 1\n" + "x" * (RESULT_SIZE - 9)]


# --- an executor session past its budget is condensed ------------------------


def fetch_then_give_up(calls: int, requests: list[ModelRequest]):
    def answer(request: ModelRequest) -> dict[str, Any]:
        requests.append(request)
        asked = sum(1 for m in request.messages for c in m.tool_calls)
        if asked < calls:
            return call("fetch")
        return call("cannot_complete", reason="enough")

    return answer


def test_past_the_budget_older_results_become_one_line_and_the_latest_stay(
    db: Database,
) -> None:
    requests: list[ModelRequest] = []
    model = FunctionModel(fetch_then_give_up(10, requests))
    # 5,000 tokens ~ 20,000 characters: passed after about five results.
    answer = runner(db, model, executor_session_tokens=5000).run(
        load_agent("executor"), executor_inputs(), Numbered()
    )
    assert answer.gave_up == "enough"
    last = requests[-1]
    results = [r.content for m in last.messages for r in m.tool_results]
    assert len(results) == 10
    whole, condensed = results[-KEEP_WHOLE:], results[:-KEEP_WHOLE]
    assert all(len(r) == RESULT_SIZE for r in whole)
    assert [r.split("\n")[0] for r in whole] == ["result 8", "result 9", "result 10"]
    summary = "[condensed: fetch {} returned 4,000 characters"
    assert all(r.startswith(summary) or len(r) == RESULT_SIZE for r in condensed)
    assert condensed[0] == (f'{summary}, starting "result 1"; call it again if you need them]')
    assert sum(r.startswith(summary) for r in condensed) >= 4
    history = sum(len(r) for r in results)
    assert history < 5000 * 4  # back under the budget
    fired = events(db, "agent.condensed")
    assert fired, "no agent.condensed event"
    assert fired[0]["agent"] == "executor"
    assert fired[0]["tokens_before"] > 5000 >= fired[0]["tokens_after"]
    assert fired[0]["results_condensed"] >= 1


def test_within_the_budget_nothing_is_condensed(db: Database) -> None:
    requests: list[ModelRequest] = []
    model = FunctionModel(fetch_then_give_up(10, requests))
    runner(db, model, executor_session_tokens=60_000).run(
        load_agent("executor"), executor_inputs(), Numbered()
    )
    results = [r.content for m in requests[-1].messages for r in m.tool_results]
    assert all(len(r) == RESULT_SIZE for r in results)
    assert events(db, "agent.condensed") == []


def test_the_models_own_count_can_pass_the_budget(db: Database) -> None:
    """A model that counts more tokens than characters / 4 suggests is believed."""
    requests: list[ModelRequest] = []
    give_up = fetch_then_give_up(4, requests)

    def answer(request: ModelRequest) -> dict[str, Any]:
        return {**give_up(request), "usage": {"input_tokens": 9000}}

    runner(db, FunctionModel(answer), executor_session_tokens=5000).run(
        load_agent("executor"), executor_inputs(), Numbered()
    )
    assert events(db, "agent.condensed")
    results = [r.content for m in requests[-1].messages for r in m.tool_results]
    assert results[0].startswith("[condensed: fetch")
