"""The prompt order and cache markers, as the local Messages-API server receives
them: stable first (tools, system, the spec), then the planner's repository map,
then what lasts of the claims (the learnings, the standing tasks), this
iteration's claims last; a marker at the end of each of those parts (with more
parts than markers, the shortest shares the next one's) and a rolling one on
the latest turn, then the system prompt and the tools while there are markers
left, never more than four; and with the server's simulated cache, the next
iteration reads back every part that did not change, on a history at its caps as
on a young one, the planner's map included when no file it shows changed."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from git import Repo

from soda.agent.definition import first_message, load_agent, terminal_tools
from soda.config import ModelConfig
from soda.llm.anthropic import AnthropicModel, wire_tools
from soda.llm.base import (
    Message,
    ModelRequest,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
    fewest_breaks,
    ignore_event,
)
from soda.loop.sense import MAX_COMMITS, MAX_TASKS_PER_GROUP, SenseInput, sense
from soda.repo.refs import tree_of
from soda.store import learnings, runs
from soda.tools.symbols import SymbolCache
from soda.tools.treemap import RepoMap, TreeMaps
from soda.trace import SqliteTracker
from tests.conftest import git
from tests.fakeapi import FakeAPI, tool_use_response
from tests.fakecache import CHARS_PER_TOKEN, prompt_blocks
from tests.test_sense import setup

pytest_plugins = ("tests.fakeapi",)

EPHEMERAL = {"type": "ephemeral"}
READ_FILE = ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {}})
SPEC = "# Calculator\n\n" + "The calculator must subtract and divide. " * 200
RULES = "Test command: `python -m pytest -q`."
"""The verifier's `tests_and_merges` (the text itself is `soda.loop.rules_text`'s)."""


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-real")


def markers(body: dict[str, Any]) -> list[str]:
    """Where the cache markers are: 'tools', 'system', or 'message N block M'."""
    found = ["tools" for tool in body.get("tools", []) if "cache_control" in tool]
    found += ["system" for block in body.get("system", []) if "cache_control" in block]
    for n, message in enumerate(body["messages"]):
        found += [
            f"message {n} block {m}"
            for m, block in enumerate(message["content"])
            if "cache_control" in block
        ]
    return found


def verifier_request(inputs: dict[str, Any], messages: list[Message] | None = None) -> ModelRequest:
    return agent_request("verifier", inputs, messages)


def agent_request(
    name: str, inputs: dict[str, Any], messages: list[Message] | None = None
) -> ModelRequest:
    agent = load_agent(name)
    return ModelRequest(
        agent=name,
        model="claude-sonnet-4-6",
        system=agent.system,
        messages=messages or [first_message(agent, inputs)],
        # A working tool besides submit: tool mode, as a real agent runs.
        tools=[READ_FILE, *terminal_tools(agent)],
        answer_tool="submit",
    )


def test_claims_come_after_the_spec_and_the_stable_part_is_marked(
    repo: Path, tmp_path: Path, fake_api: FakeAPI
) -> None:
    inp, _ = setup(repo, tmp_path, commits=2)
    claims = sense(inp)
    model = AnthropicModel(ModelConfig(base_url=fake_api.url), ignore_event)
    fake_api.enqueue(tool_use_response("submit", {"x": 1}))
    model.complete(verifier_request({"spec": SPEC, "tests_and_merges": RULES, "claims": claims}))
    body = fake_api.requests[0].body
    stable, rules, volatile = body["messages"][0]["content"]
    assert stable["text"].startswith("## Spec") and SPEC.strip() in stable["text"]
    assert rules["text"] == f"## Tests And Merges\n\n{RULES}\n\n"
    assert stable["cache_control"] == rules["cache_control"] == EPHEMERAL
    assert volatile["text"].startswith("## Claims") and volatile["cache_control"] == EPHEMERAL
    # No volatile value in the stable part: no SHA, no iteration counter.
    assert claims.code.head[:10] not in stable["text"] and "iteration 1" not in stable["text"]
    assert claims.code.head[:10] in volatile["text"]
    assert claims.code.head not in volatile["text"]  # short SHAs only
    assert markers(body) == [
        "system",
        "message 0 block 0",
        "message 0 block 1",
        "message 0 block 2",
    ]


def test_a_tool_loop_moves_the_rolling_marker_and_stays_within_four(fake_api: FakeAPI) -> None:
    model = AnthropicModel(ModelConfig(base_url=fake_api.url), ignore_event)
    first = first_message(
        load_agent("verifier"), {"spec": SPEC, "tests_and_merges": RULES, "claims": {"head": "abc"}}
    )
    conversation = [first]
    for n in range(3):
        call = ToolCall(f"toolu_{n}", "submit", {"x": n})
        conversation += [
            Message("assistant", tool_calls=[call]),
            Message("user", tool_results=[ToolResult(call.id, f"result {n}")]),
        ]
    fake_api.enqueue(tool_use_response("submit", {"x": 1}))
    model.complete(verifier_request({}, conversation))
    body = fake_api.requests[0].body
    assert markers(body) == [
        "system",
        "message 0 block 0",
        "message 0 block 1",
        "message 6 block 0",
    ]


def test_with_three_lasting_parts_the_system_and_tools_give_up_their_markers(
    fake_api: FakeAPI,
) -> None:
    first = Message("user", "## Spec\n\nS\n\nL\n\nT\n\nC", cache_breaks=(12, 15, 18))
    call = ToolCall("toolu_0", "read_file", {})
    conversation = [
        first,
        Message("assistant", tool_calls=[call]),
        Message("user", tool_results=[ToolResult(call.id, "text")]),
    ]
    model = AnthropicModel(ModelConfig(base_url=fake_api.url), ignore_event)
    fake_api.enqueue(tool_use_response("submit", {"x": 1}))
    model.complete(verifier_request({}, conversation))
    body = fake_api.requests[0].body
    assert [b["text"] for b in body["messages"][0]["content"]] == [
        "## Spec\n\nS\n\n",
        "L\n\n",
        "T\n\n",
        "C",
    ]
    # The most stable parts and the rolling marker: four, the API's limit.
    assert markers(body) == [
        "message 0 block 0",
        "message 0 block 1",
        "message 0 block 2",
        "message 2 block 0",
    ]


def test_more_lasting_parts_than_markers_the_shortest_shares_the_next_ones(
    fake_api: FakeAPI,
) -> None:
    # The spec (10), the map (40), learnings (5), standing work (8), then what changes.
    text = "S" * 10 + "M" * 40 + "L" * 5 + "T" * 8 + "C" * 7
    assert fewest_breaks([10, 50, 55, 63], 3) == [10, 50, 63]
    assert fewest_breaks([10, 50, 55, 63], 1) == [63]  # where what lasts ends stays
    assert fewest_breaks([10, 50], 3) == [10, 50]
    model = AnthropicModel(ModelConfig(base_url=fake_api.url), ignore_event)
    fake_api.enqueue(tool_use_response("submit", {"x": 1}))
    first = Message("user", text, cache_breaks=(10, 50, 55, 63))
    model.complete(verifier_request({}, [first]))
    body = fake_api.requests[0].body
    blocks = [b["text"] for b in body["messages"][0]["content"]]
    assert blocks == ["S" * 10, "M" * 40, "L" * 5 + "T" * 8, "C" * 7]
    assert markers(body) == [f"message 0 block {n}" for n in range(4)]


def test_a_break_short_of_the_models_shortest_cacheable_prefix_gives_its_marker_on(
    fake_api: FakeAPI,
) -> None:
    """Claude Haiku 4.5 caches prefixes of 4,096 tokens or more: a spec that ends
    before that caches nothing on its own, so its marker goes to the next part
    (the rules after it), and the next request reads spec and rules back."""
    fake_api.simulate_cache = True
    model = AnthropicModel(ModelConfig(base_url=fake_api.url), ignore_event)
    request = verifier_request({}, [Message("user", "x")])
    head = len(request.system) + len(json.dumps(wire_tools(request.tools)))
    spec = "S" * (4096 * CHARS_PER_TOKEN - head - 2000)  # 500 tokens short
    text = spec + "R" * 4000 + "L" * 400 + "T" * 400
    breaks = (len(spec), len(spec) + 4000, len(spec) + 4400, len(spec) + 4800)
    sent = []
    for changing in ("C1", "C2"):
        first = Message("user", text + changing, cache_breaks=breaks)
        haiku = replace(request, model="claude-haiku-4-5", messages=[first])
        fake_api.enqueue(tool_use_response("submit", {"x": 1}))
        sent.append(model.complete(haiku).usage)
    body = fake_api.requests[-1].body
    assert first_blocks(body) == [spec + "R" * 4000, "L" * 400, "T" * 400, "C2"]
    assert sent[1].cache_read_tokens == prefix_tokens(body, 2) > 4096
    # On Sonnet (1,024 tokens) the spec keeps its own marker; the shortest part shares.
    fake_api.enqueue(tool_use_response("submit", {"x": 1}))
    model.complete(replace(request, messages=[first]))
    assert first_blocks(fake_api.requests[-1].body) == [
        spec,
        "R" * 4000,
        "L" * 400 + "T" * 400,
        "C2",
    ]


def test_the_next_iteration_reads_the_stable_part_from_the_cache(
    repo: Path, tmp_path: Path, fake_api: FakeAPI
) -> None:
    fake_api.simulate_cache = True
    inp, _ = setup(repo, tmp_path, commits=2)
    model = AnthropicModel(ModelConfig(base_url=fake_api.url), ignore_event)
    usages = []
    for number in (1, 2):
        claims = sense(inp.__class__(**{**inp.__dict__, "iteration": number}))
        fake_api.enqueue(tool_use_response("submit", {"x": 1}))
        usages.append(
            model.complete(
                verifier_request({"spec": SPEC, "tests_and_merges": RULES, "claims": claims})
            ).usage
        )
    first, second = usages
    assert first.cache_read_tokens == 0 and first.cache_creation_tokens > 0
    # The second iteration's claims differ (the iteration number), the rest is read.
    assert second.cache_read_tokens > 0.8 * (
        second.input_tokens + second.cache_creation_tokens + second.cache_read_tokens
    )
    assert second.cache_creation_tokens > 0  # its claims were written after the spec


# --- a mature history ------------------------------------------------------------

ORIENT = ("verifier", "assessor", "planner")
FINDINGS = {
    "tests_and_merges": "Test command: `python -m pytest -q`.",
    "verification": {"checks": [], "task_updates": [], "summary": "claims hold"},
    "assessment": {"spec_satisfied": False, "confidence": "medium", "summary": "divide missing"},
}
EVERY_ITERATION = ("recently closed", "comments (newest first)", "### code", "budget: $")
"""Claims that change every iteration: never before the last lasting marker."""
MAP_TOKENS = 200
"""The planner's map: cut inside the `calc` package, so the files a past iteration
adds (step_N.py at the top level, ranked after the package) never reach it."""


def module(n: int, extra: str = "") -> str:
    """One module of the `calc` package, with public functions the map lists."""
    ops = "".join(f"def op_{n}_{k}(a: float, b: float) -> float: ...\n" for k in range(3))
    return f'"""Operations {n}."""\n{ops}{extra}'


def mature(repo: Path, tmp_path: Path) -> tuple[SenseInput, SqliteTracker]:
    """SENSE's input on a history at its caps: more open tasks than are shown,
    blocked ones, the learnings at [context] max_learnings (older ones retired),
    past iterations that each closed a task with a comment and made a commit; the
    milestone holds a `calc` package larger than the planner's map."""
    inp, db = setup(repo, tmp_path, commits=MAX_COMMITS + 2)
    git(repo, "checkout", "-q", "soda/spec")
    (repo / "calc").mkdir()
    (repo / "calc" / "__init__.py").write_text("")
    for n in range(12):
        (repo / "calc" / f"ops_{n:02d}.py").write_text(module(n))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the calc package")
    git(repo, "checkout", "-q", "main")
    tracker = SqliteTracker(db, "spec")
    root = tracker.create("Calculator")
    for n in range(MAX_TASKS_PER_GROUP + 3):
        tracker.create(f"Handle edge case {n}", parent_id=root.id)
    for n in range(3):
        task = tracker.create(f"Ask about rounding mode {n}", parent_id=root.id)
        tracker.block(task.id, "the spec leaves the rounding mode open")
    for n in range(inp.config.context.max_learnings + 3):
        learn(inp, n)
    for number in range(1, 8):
        past_iteration(inp, tracker, number)
    return replace(inp, iteration=8), tracker


def learn(inp: SenseInput, n: int) -> None:
    cap = inp.config.context.max_learnings
    learnings.add(inp.db, [f"fact {n}: calc.py lists its operations in OPS"], "verifier", None, cap)


def past_iteration(
    inp: SenseInput, tracker: SqliteTracker, number: int, edit: tuple[str, str] | None = None
) -> None:
    """What an iteration leaves behind: a task of its own done and closed with a
    comment, a commit on the milestone branch (a new file; `edit`: a path and the
    text written to it as well), its record."""
    root = tracker.root()
    assert root is not None
    task = tracker.create(f"Step {number}", parent_id=root.id)
    tracker.comment(task.id, "executor", f"step {number} done; the suite passes")
    tracker.close(task.id, f"merged in iteration {number}")
    git(inp.repo_path, "checkout", "-q", "soda/spec")
    (inp.repo_path / f"step_{number}.py").write_text(f"STEP = {number}\n")
    if edit is not None:
        (inp.repo_path / edit[0]).write_text(edit[1])
    git(inp.repo_path, "add", "-A")
    git(inp.repo_path, "commit", "-q", "-m", f"Step {number}")
    git(inp.repo_path, "checkout", "-q", "main")
    iteration_id = runs.start_iteration(inp.db, inp.run_id, number)
    record = {"intent": f"step {number}", "decision": "continue", "outcome": "merged"}
    runs.save_iteration(inp.db, iteration_id, {**record, "act_json": {"outcome": "merged"}})


def tip_map(inp: SenseInput, maps: TreeMaps) -> RepoMap:
    """The planner's map of the milestone tip, as ORIENT makes it."""
    repo = Repo(inp.repo_path)
    tip = git(inp.repo_path, "rev-parse", inp.milestone_branch)
    return maps.map(repo, tree_of(repo, tip), MAP_TOKENS)


def orient_requests(
    fake_api: FakeAPI, inp: SenseInput, maps: TreeMaps
) -> dict[str, tuple[dict[str, Any], Usage]]:
    """Each ORIENT agent's first request on this iteration's claims, and its usage."""
    claims = sense(inp)
    model = AnthropicModel(ModelConfig(base_url=fake_api.url), ignore_event)
    sent = {}
    for name in ORIENT:
        given = {"spec": SPEC, "claims": claims, **FINDINGS, "repo_map": tip_map(inp, maps)}
        inputs = {key: given[key] for key in load_agent(name).inputs if key in given}
        fake_api.enqueue(tool_use_response("submit", {"x": 1}))
        usage = model.complete(agent_request(name, inputs)).usage
        sent[name] = (fake_api.requests[-1].body, usage)
    return sent


def prefix_tokens(body: dict[str, Any], block: int) -> int:
    """Tokens of the request through the first message's block `block`, as the
    simulated cache counts them."""
    blocks = prompt_blocks(body)
    first = len(prompt_blocks({**body, "messages": []}))  # tools, system
    return sum(len(text) for text, _ in blocks[: first + block + 1]) // CHARS_PER_TOKEN


def first_blocks(body: dict[str, Any]) -> list[str]:
    return [block["text"] for block in body["messages"][0]["content"]]


def test_a_mature_history_reads_what_lasts_from_the_cache_in_the_next_iteration(
    repo: Path, tmp_path: Path, fake_api: FakeAPI
) -> None:
    fake_api.simulate_cache = True
    maps = TreeMaps(SymbolCache())
    inp, tracker = mature(repo, tmp_path)
    before = orient_requests(fake_api, inp, maps)
    past_iteration(inp, tracker, inp.iteration)  # a task closed, a comment, a commit
    inp = replace(inp, iteration=inp.iteration + 1)
    after = orient_requests(fake_api, inp, maps)
    head = sense(inp).code.head[:10]
    for name in ORIENT:
        body, usage = after[name]
        # Three lasting parts, then what changes: four markers, the last the
        # rolling one (on the first turn, the message's end).
        assert markers(body) == [f"message 0 block {n}" for n in range(4)], name
        spec, *middle, changing = first_blocks(body)
        assert spec.startswith("## Spec")
        if name == "planner":
            # The spec, tests and merges with the repository map, then what lasts
            # of the claims: the shortest parts (tests and merges, the learnings)
            # share the next part's marker (five parts, three markers).
            assert "## Tests And Merges" not in spec
            mapped, claims = middle
            assert mapped.startswith("## Tests And Merges\n\nTest command: `python -m pytest -q`.")
            assert "\n\n## Repo Map\n\nREADME.md\ncalc/ops_00.py\n  def op_0_0(" in mapped
            assert claims.startswith("## Claims\n\n### learnings") and "\n### tasks" in claims
            # The map's count of files comes with what changes every iteration.
            assert changing.startswith("## Repo Map (continued)\n\n[")
            assert "files left out; call repo_map" in changing.split("\n\n")[1]
            assert "## Claims (continued)\n\n### tasks (Trace), lately\n" in changing
            standing = claims
        else:
            learned, standing = middle
            if name == "verifier":  # tests and merges, short, shares the learnings' marker
                rules, learned = learned.split("## Claims", 1)
                assert rules.startswith("## Tests And Merges\n\nTest command: `python -m pytest")
                learned = "## Claims" + learned
            assert learned.startswith("## Claims\n\n### learnings")
            assert standing.startswith("### tasks (Trace)\nroot (the spec): #1 Calculator")
            assert changing.startswith("## Claims (continued)\n\n### tasks (Trace), lately\n")
        assert "open:\n- #2 Handle edge case 0" in standing and "blocked:" in standing
        # The boundary: nothing that changes every iteration before the last
        # lasting marker, neither this iteration's number nor the head.
        lasting = "".join([spec, *middle])
        for volatile in (*EVERY_ITERATION, f"iteration {inp.iteration}", head, "Step 8"):
            assert volatile not in lasting and volatile in changing, (name, volatile)
        assert "step_8.py" not in lasting  # the new file is past the map's cut
        # What lasts is what the iteration before sent, so the cache serves it.
        assert first_blocks(before[name][0])[:3] == first_blocks(body)[:3], name
        assert usage.cache_read_tokens == prefix_tokens(body, 2), name
    assert all(len(markers(request.body)) <= 4 for request in fake_api.requests)


def test_a_change_to_what_lasts_costs_only_the_parts_from_it_on(
    repo: Path, tmp_path: Path, fake_api: FakeAPI
) -> None:
    fake_api.simulate_cache = True
    maps = TreeMaps(SymbolCache())
    inp, tracker = mature(repo, tmp_path)
    orient_requests(fake_api, inp, maps)

    def next_iteration(edit: tuple[str, str] | None = None) -> dict[str, int]:
        nonlocal inp
        past_iteration(inp, tracker, inp.iteration, edit)
        inp = replace(inp, iteration=inp.iteration + 1)
        sent = orient_requests(fake_api, inp, maps)
        blocks = {name: len(prefix_read(body, usage)) for name, (body, usage) in sent.items()}
        return {name: count - 1 for name, count in blocks.items()}

    def prefix_read(body: dict[str, Any], usage: Usage) -> list[int]:
        """The first message's blocks read from the cache (their indexes)."""
        found = [n for n in range(4) if prefix_tokens(body, n) <= usage.cache_read_tokens]
        assert usage.cache_read_tokens == (prefix_tokens(body, found[-1]) if found else 0)
        return found

    # A standing task worked and closed: the learnings are still read, and the
    # planner's map.
    tracker.close(2, "merged in iteration 8")
    assert next_iteration() == {"verifier": 1, "assessor": 1, "planner": 1}
    # A new learning (the oldest retired at the cap): the spec is still read, and
    # the planner's map (its learnings share the standing work's marker).
    learn(inp, 100)
    assert next_iteration() == {"verifier": 0, "assessor": 0, "planner": 1}
    # A function added to a module the map shows: the planner reads the spec; the
    # others all that lasts.
    edit = ("calc/ops_00.py", module(0, "def op_0_new(a: float) -> float: ...\n"))
    assert next_iteration(edit) == {"verifier": 2, "assessor": 2, "planner": 0}
    assert "def op_0_new(a: float)" in tip_map(inp, maps).listing
    # Files past the map's cut changed (a new step_N.py each time): the map was
    # moved forward, not built again.
    assert maps.trees_read == 1
    assert all(len(markers(request.body)) <= 4 for request in fake_api.requests)


def test_the_planners_tool_loop_keeps_its_lasting_markers_and_the_rolling_one(
    repo: Path, tmp_path: Path, fake_api: FakeAPI
) -> None:
    """A second turn (after a read_file) reads the whole first message back: three
    lasting markers and the rolling one, four in all."""
    fake_api.simulate_cache = True
    inp, _ = mature(repo, tmp_path)
    given = {"spec": SPEC, "claims": sense(inp), **FINDINGS}
    given["repo_map"] = tip_map(inp, TreeMaps(SymbolCache()))
    inputs = {key: given[key] for key in load_agent("planner").inputs if key in given}
    first = first_message(load_agent("planner"), inputs)
    model = AnthropicModel(ModelConfig(base_url=fake_api.url), ignore_event)
    fake_api.enqueue(tool_use_response("submit", {"x": 1}))
    model.complete(agent_request("planner", inputs))
    call = ToolCall("toolu_0", "read_file", {"path": "calc/ops_00.py"})
    conversation = [
        first,
        Message("assistant", tool_calls=[call]),
        Message("user", tool_results=[ToolResult(call.id, module(0))]),
    ]
    fake_api.enqueue(tool_use_response("submit", {"x": 1}))
    usage = model.complete(agent_request("planner", {}, conversation)).usage
    body = fake_api.requests[-1].body
    assert markers(body) == [*(f"message 0 block {n}" for n in range(3)), "message 2 block 0"]
    assert usage.cache_read_tokens == prefix_tokens(body, 3)
