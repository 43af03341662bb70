"""What the agents are told, read as a model reading it cold would: the test
command, the gate's hold rules and the approval threshold as configured (for the
agents that plan or change code); one id and one description per task for the
executor; contracts with every field required; closing lines that match what an
agent has; `ask_human` described per role and withheld from the verifier and the
assessor; and no more union-typed parameters than a strict tool API allows.

The loop runs for real on the demo's sample project (git, SQLite, the jail);
the only fake is the model, which records the requests it gets."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from soda.agent.definition import first_message, load_agent
from soda.config import load
from soda.config.resources import resource_dir
from soda.contracts import load_schema
from soda.llm.base import ModelRequest, ToolSpec
from soda.llm.function import Reply, call, first_turn, submit
from soda.loop.run import run_loop
from tests.plan_fakes import (
    NOT_MET,
    VERIFIED,
    done,
    executor,
    fake_model,
    new_project,
    open_session,
    plan,
    planning,
    set_key,
    task,
    task_of,
)

AGENTS = sorted(path.stem for path in resource_dir("agents").glob("*.md") if path.stem != "README")
MAX_UNION_PARAMETERS = 15
"""Most parameters typed `anyOf` or with a type array across one request's tools.
Anthropic's strict tools allow 16 in a request; before these prompts were
rewritten the orienter sent 16 and the planner 15 (measured with
`union_parameters`), now 15 and 14."""


def first_requests(
    answers: dict[str, Callable[[ModelRequest], Reply]],
) -> tuple[dict[str, Callable[[ModelRequest], Reply]], dict[str, ModelRequest]]:
    """`answers`, each keeping its agent's first request (the first of each name)."""
    seen: dict[str, ModelRequest] = {}

    def keeping(name: str, answer: Callable[[ModelRequest], Reply]) -> Any:
        def wrapped(request: ModelRequest) -> Reply:
            if len(request.messages) == 1:
                seen.setdefault(name, request)
            return answer(request)

        return wrapped

    return {name: keeping(name, answer) for name, answer in answers.items()}, seen


def one_iteration(
    root: Path, **answers: Callable[[ModelRequest], Reply]
) -> dict[str, ModelRequest]:
    """Run one iteration with the plan fakes (plus `answers`); each agent's first request."""
    the_plan = plan(task("a"), task("b", "a"))
    defaults = {
        "verifier": lambda request: submit(VERIFIED),
        "assessor": lambda request: submit(NOT_MET),
        "planner": lambda request: submit(planning(the_plan)),
        "orienter": lambda request: submit(orientation(the_plan)),
        "executor": executor,
    }
    wrapped, seen = first_requests({**defaults, **answers})
    session = open_session(root, fake_model(the_plan, **wrapped))
    run_loop(session, lambda line: None, once=True)
    session.finish_run("done", "test")
    return seen


def orientation(the_plan: dict[str, Any]) -> dict[str, Any]:
    return {
        **{key: value for key, value in NOT_MET.items() if key != "summary"},
        **planning(the_plan),
        "summary": "not met",
        "task_updates": [],
        "learning_verdicts": [],
    }


def tool(request: ModelRequest, name: str) -> ToolSpec:
    (found,) = [spec for spec in request.tools if spec.name == name]
    return found


def union_parameters(node: Any) -> int:
    """Properties, at any depth, typed `anyOf`/`oneOf` or with a list of types."""
    if isinstance(node, list):
        return sum(union_parameters(item) for item in node)
    if not isinstance(node, dict):
        return 0
    count = 0
    properties = node.get("properties")
    if isinstance(properties, dict):
        count += sum(
            1
            for sub in properties.values()
            if "anyOf" in sub or "oneOf" in sub or isinstance(sub.get("type"), list)
        )
    return count + sum(union_parameters(value) for value in node.values())


# --- what the agents that plan or change code are told ---------------------------------


def test_the_executor_and_planner_are_told_the_test_command_hold_rules_and_threshold(
    tmp_path: Path,
) -> None:
    root = new_project(tmp_path, {"timeout = 3600.0": "timeout = 120.0"})
    set_key(root, "risk_threshold", '"medium"')
    set_key(root, "protected", '["soda.toml", "migrations/*"]')
    command = load(root / "soda.toml").project.test_command

    seen = one_iteration(root)

    for agent in ("planner", "executor"):
        text = seen[agent].messages[0].text
        told = text.split("## Tests And Merges\n\n", 1)[1].split("\n\n## ", 1)[0]
        assert f"Test command: `{command}`" in told, agent
        # Selecting one test with that command, as run_tests will run it.
        assert f"`{command} tests/test_x.py::test_name`" in told, agent
        # The hold rules in force, from the gate's own tables and [gate] protected.
        for rule in ("conftest.py", "tox.ini", "PYTEST_ADDOPTS", "_pytest", "atexit"):
            assert rule in told, (agent, rule)
        assert "migrations/*" in told and "missing or skipped" in told
        # The threshold and the timeout in force.
        assert 'risk_threshold = "medium"' in told and "medium or higher" in told
        assert "2 minutes (120 s)" in told
        # Stable (the cached prefix), a part of its own before this iteration's
        # claims or task.
        end = text.index(told) + len(told) + 2
        assert end in seen[agent].messages[0].cache_breaks, agent
        assert "## Claims" not in text[:end] and "## Task" not in text[:end], agent
    executor_tests = tool(seen["executor"], "run_tests")
    assert command in executor_tests.description
    assert executor_tests.input_schema["properties"]["selector"]["type"] == "string"
    # The planner's hints point at run_tests, not at a command of its own.
    assert 'tool_hints` write "run_tests selector' in seen["planner"].messages[0].text
    assert "pytest -q" not in json.dumps(load_schema("planning"))


def test_the_orienter_is_told_them_too_and_about_learnings(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    set_key(root, "orient_pattern", '"single"')
    set_key(root, "risk_threshold", '"critical"')

    seen = one_iteration(root)

    text = seen["orienter"].messages[0].text
    assert 'risk_threshold = "critical"' in text and "conftest.py" in text
    assert "PYTEST_ADDOPTS" in text
    system = seen["orienter"].system
    assert "learning_verdicts" in system and "`learnings`" in system
    assert "ask_human" in {spec.name for spec in seen["orienter"].tools}


def test_no_prompt_names_what_the_model_never_sees() -> None:
    for name in AGENTS:
        system = load_agent(name).system
        assert "project.loop.warning" not in system, name
        assert "constraint filters" not in system, name
    for name in ("planner", "orienter"):
        assert "`loop warning:`" in load_agent(name).system


# --- the executor's task ----------------------------------------------------------------


def test_the_executor_sees_one_id_per_task_and_on_a_retry_one_description(
    tmp_path: Path,
) -> None:
    original = "Write notes/a.txt holding the first idea."
    rewritten = "Smaller this time: write notes/a.txt holding one word."
    firsts: list[str] = []

    def on_task_a(request: ModelRequest) -> Reply:
        if len(request.messages) == 1:
            firsts.append(request.messages[0].text)
        if len(firsts) == 1:
            return call("cannot_complete", reason="the first idea does not work")
        if first_turn(request):
            return call("write_file", path="notes/a.txt", content="word")
        return done("wrote it")

    def retrier(request: ModelRequest) -> Reply:
        return submit({"description": rewritten, "reason": "it gave up; ask for less"})

    the_plan = plan({**task("a"), "description": original}, task("b", "a"))
    root = new_project(tmp_path)
    set_key(root, "task_retries", "1")
    session = open_session(
        root,
        fake_model(
            the_plan,
            planner=lambda request: submit(planning(the_plan)),
            executor=lambda request: (
                on_task_a(request) if task_of(request)["title"] == "Task a" else done("b")
            ),
            retrier=retrier,
        ),
    )
    run_loop(session, lambda line: None, once=True)
    session.finish_run("done", "test")

    first, retry = firsts
    (trace_id,) = [row.id for row in session.tracker.list() if row.title == "Task a"]
    shown = json.loads(first.split("## Task\n\n", 1)[1].split("\n\n## ", 1)[0])
    assert shown["id"] == trace_id and "task_id" not in shown
    plan_part = first.split("## Plan\n\n", 1)[1].split("\n\n## ", 1)[0]
    assert f"- #{trace_id} Task a" in plan_part and f"(after #{trace_id})" in plan_part
    assert '"id": "a"' not in first and '"a"' not in plan_part
    # One description: the task's own section; on the retry, the rewritten one only.
    assert first.count(original) == 1
    assert rewritten in retry and retry.count(rewritten) == 1 and original not in retry


# --- contracts, closing lines, tools ----------------------------------------------------


def test_every_agents_contract_requires_every_property() -> None:
    def objects(node: Any) -> list[dict[str, Any]]:
        if isinstance(node, list):
            return [found for item in node for found in objects(item)]
        if not isinstance(node, dict):
            return []
        here = [node] if isinstance(node.get("properties"), dict) else []
        return here + [found for value in node.values() for found in objects(value)]

    for name in AGENTS:
        contract = load_agent(name).contract
        for schema in objects(load_schema(contract)):
            assert set(schema.get("required", [])) == set(schema["properties"]), (name, schema)
    assert "tasks_completed" not in load_schema("execute")["properties"]


@pytest.mark.parametrize("name", [n for n in AGENTS if load_agent(n).tools == "none"])
def test_a_tool_less_agent_is_told_to_answer_with_json_not_to_use_tools(name: str) -> None:
    agent = load_agent(name)
    text = first_message(agent, {input: "(value)" for input in agent.inputs}).text
    assert "tool" not in text.lower() and "submit" not in text
    assert "JSON object" in text
    assert "submit" not in agent.system


def test_every_agent_with_tools_is_told_to_submit_alone() -> None:
    for name in AGENTS:
        agent = load_agent(name)
        if agent.tools == "none":
            continue
        closing = first_message(agent, {input: "(value)" for input in agent.inputs}).text
        assert "call `submit`" in closing.rsplit("\n", 1)[-1] and "alone" in closing, name


def test_ask_human_is_explained_per_role_and_withheld_from_the_checkers(tmp_path: Path) -> None:
    seen = one_iteration(new_project(tmp_path))

    offered = {agent: {spec.name for spec in request.tools} for agent, request in seen.items()}
    assert "ask_human" not in offered["verifier"] and "ask_human" not in offered["assessor"]
    assert "ask_human" in offered["planner"] and "ask_human" in offered["executor"]
    planner_ask = tool(seen["planner"], "ask_human").description
    assert "ends this orientation" in planner_ask and "STUCK" in planner_ask
    executor_ask = tool(seen["executor"], "ask_human").description
    assert "cannot_complete" in executor_ask and "resumes" in executor_ask
    for agent in ("planner", "executor"):
        assert "ask_human" in seen[agent].system, agent


def test_no_request_has_more_union_typed_parameters_than_a_strict_api_allows(
    tmp_path: Path,
) -> None:
    seen = one_iteration(new_project(tmp_path))
    root = new_project(tmp_path / "single")
    set_key(root, "orient_pattern", '"single"')
    seen |= one_iteration(root)

    counts = {
        agent: sum(union_parameters(spec.input_schema) for spec in request.tools)
        for agent, request in seen.items()
    }
    assert set(counts) >= {"verifier", "assessor", "planner", "orienter", "executor"}
    assert max(counts.values()) <= MAX_UNION_PARAMETERS, counts
