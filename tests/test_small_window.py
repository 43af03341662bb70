"""A model with an 8,192-token context window: soda runs on it, each agent's
first request fits with its answer's share, and the tools are offered in short
forms (fewer of them only when even those are too long), the same ones in every
request, so the prompt cache keeps serving the prefix they lead.

The run is the demo's sample project driven by the behavioural fake of
tests/test_realistic_model.py, which refuses (as a server does) any request past
its window; the project, git, the jail, the gate and the database are real.
What the Anthropic provider would send is built from the recorded requests
(`build_params`), cache markers included.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from soda.agent.definition import load_agent, terminal_tools
from soda.agent.diet import SPARE, TOOL_SHARE, first_sentence, offered_tools, tool_tokens
from soda.cli.doctor import run_checks
from soda.llm.anthropic import answers_as_json, build_params
from soda.llm.base import ModelRequest, ToolSpec
from soda.loop.run import Ending, run_loop
from soda.system.jail import Jail
from soda.tools import Sandbox, worktree_tools
from soda.tools.ask import ASK_HUMAN
from tests.plan_fakes import new_project, open_session, set_key
from tests.test_realistic_model import RealisticModel

WINDOW = 8192


def first_requests(model: RealisticModel) -> list[tuple[ModelRequest, int]]:
    """Each agent run's first request with its size and answer's share, in order."""
    return [(request, size) for request, size in model.sizes if len(request.messages) == 1]


def wire(request: ModelRequest) -> dict[str, Any]:
    """The request as the Anthropic provider sends it."""
    return build_params(request, answers_as_json(request))


def stable_prefix(body: dict[str, Any]) -> str:
    """Tools, system prompt and the first message up to its first cache marker
    (the inputs that are the same in every iteration), as the API reads them."""
    blocks = body["messages"][0]["content"]
    end = next(i for i, block in enumerate(blocks) if "cache_control" in block)
    return json.dumps([body.get("tools"), body["system"], blocks[: end + 1]], sort_keys=True)


def worktree(tmp_path: Path) -> list[ToolSpec]:
    sandbox = Sandbox(tmp_path)
    jail = Jail(mode="none", repo_root=tmp_path, git_dir=tmp_path / ".git")
    executor = load_agent("executor")
    tools = worktree_tools(sandbox, 1.0, 1000, jail=jail).specs()
    return [*tools, ASK_HUMAN, *terminal_tools(executor)]


def test_an_8k_window_runs_to_done_with_every_first_request_inside_it(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    set_key(root, "context_window", str(WINDOW))
    model = RealisticModel(WINDOW)
    session = open_session(root, model)  # type: ignore[arg-type]
    result = run_loop(session, lambda line: None)

    assert result.ending is Ending.DONE, result.reason
    firsts = first_requests(model)
    agents = {request.agent for request, _ in firsts}
    assert {"verifier", "assessor", "planner", "executor"} <= agents
    too_big = [(request.agent, size) for request, size in firsts if size > WINDOW]
    assert too_big == [] and model.refused == 0
    # The executor was offered the short forms: the same tools, a quarter of the window.
    executor = next(request for request, _ in firsts if request.agent == "executor")
    names = {tool.name for tool in executor.tools}
    assert {"read_file", "edit_file", "run_tests", "submit", "cannot_complete"} <= names
    assert tool_tokens(executor.tools) <= WINDOW // TOOL_SHARE


def test_the_stable_prefix_is_byte_identical_from_one_iteration_to_the_next(
    tmp_path: Path,
) -> None:
    root = new_project(tmp_path)
    set_key(root, "context_window", str(WINDOW))
    model = RealisticModel(WINDOW)
    session = open_session(root, model)  # type: ignore[arg-type]
    assert run_loop(session, lambda line: None).ending is Ending.DONE

    by_agent: dict[str, list[dict[str, Any]]] = {}
    for request, _ in first_requests(model):
        by_agent.setdefault(request.agent, []).append(wire(request))
    twice = {agent: bodies for agent, bodies in by_agent.items() if len(bodies) >= 2}
    assert {"verifier", "assessor"} <= set(twice)  # both iterations ran them
    for agent, (first, second, *_) in twice.items():
        assert stable_prefix(first) == stable_prefix(second), agent
        assert first["messages"][0] != second["messages"][0], agent  # the claims did change
        # What changes every iteration comes after the last marker of the message.
        *_, last = first["messages"][0]["content"]
        assert "cache_control" in last and last["text"].startswith("## Spec") is False


def test_big_windows_get_every_tool_whole(tmp_path: Path) -> None:
    tools = worktree(tmp_path)
    assert offered_tools(tools, 200_000) == tools
    assert offered_tools(tools, 32_768) == tools


def test_a_small_window_gets_short_forms_that_accept_the_same_arguments(tmp_path: Path) -> None:
    tools = worktree(tmp_path)
    short = offered_tools(tools, WINDOW)
    assert [tool.name for tool in short] == [tool.name for tool in tools]
    assert tool_tokens(short) <= WINDOW // TOOL_SHARE < tool_tokens(tools)
    for whole, cut in zip(tools, short, strict=True):
        assert cut.description == first_sentence(whole.description)
        assert whole.description.startswith(cut.description.split(", e.g.")[0][:40])
        assert _shape(cut.input_schema) == _shape(whole.input_schema), whole.name


def test_a_tiny_window_leaves_out_the_tools_least_needed_first(tmp_path: Path) -> None:
    tools = worktree(tmp_path)
    names = [tool.name for tool in tools]
    short = offered_tools(tools, 4096)
    kept = [tool.name for tool in short]
    left_out = [name for name in names if name not in kept]
    assert left_out and set(left_out) == set(SPARE[: len(left_out)])  # in SPARE's order
    assert {"read_file", "write_file", "edit_file", "run_command", "submit"} <= set(kept)
    assert {"cannot_complete", "ask_human", "search_text", "list_files"} <= set(kept)


def test_first_sentence_keeps_abbreviations_and_joins_lines() -> None:
    assert first_sentence("A path, e.g. 'src/a.py' (absolute\npaths refused). More.") == (
        "A path, e.g. 'src/a.py' (absolute paths refused)."
    )
    assert first_sentence("Version 1.2 is read. Then") == "Version 1.2 is read."
    assert first_sentence("no full stop") == "no full stop"


def _shape(schema: Any) -> Any:
    """A schema without its descriptions: what it accepts."""
    if isinstance(schema, dict):
        return {k: _shape(v) for k, v in schema.items() if k not in ("description", "title")}
    if isinstance(schema, list):
        return [_shape(item) for item in schema]
    return schema


def test_the_doctor_passes_an_8k_window(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    set_key(root, "context_window", str(WINDOW))
    [fit] = [check for check in run_checks(root) if check.name == "fit"]
    assert fit.ok, fit.detail  # a warning at most: little room is left for the conversation
    assert "of a 8,192-token window (from model.context_window)" in fit.detail
