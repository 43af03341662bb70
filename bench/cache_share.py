"""Share of input tokens readable from the prompt cache, per iteration, over a
run on the Anthropic provider against the local Messages-API server
(tests/fakeapi.py with `simulate_cache`: a prefix up to a cache marker an
earlier request wrote is read back, as the API does; tokens ~ characters / 4).

The model is a behavioural fake that works like a careful one: the verifier
runs the tests and reads a file, the assessor runs the tests, the planner
(given the repository map in its first message) reads the file its plan is
about and plans one task, the executor writes a file, reads it back and
submits. `--planner-maps` has the planner call `repo_map` for the overview
instead, as it did before the map was one of its inputs. `--fast claude-haiku-4-5`
runs the verifier on soda's default fast model, whose shortest cacheable prefix
is 4,096 tokens (tests/fakecache.py). `--executor-edits`
has the executor add a function to calc.py instead of writing a note, as real
work does: the repository map then changes every iteration. Every tool call is
real (the tests run in the jail, the gate merges each change).

`--history N` first seeds N past iterations (bench/mature_history.py: every cap
of the claims full, the learnings at theirs, a 10,000-file repository at 10,000)
and the agents go on as that history did: the verifier records a learning every
fourth iteration, the planner opens a follow-up every third and, every third,
works the oldest open task instead of a new one.

Printed per agent, from the run's second iteration on (its first writes the
cache): the share over every turn, and over first turns alone (tools, system
prompt and first message: what the layout of the inputs decides; the later
turns add the agents' own tool results). Goal, over every turn: >= 85% of all
input and of ORIENT's, >= 80% of each ORIENT agent's.

    python bench/cache_share.py [-n 5] [--history 10000] [--sandbox bwrap|none] [--calls]
                                [--planner-maps] [--executor-edits] [--fast MODEL]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mature_history
from local_api import (
    EXECUTED,
    NOT_MET,
    VERIFIED,
    agent_of,
    anthropic_project,
    call,
    plan,
    responder,
    submit,
    turns,
)

import soda
from soda.config import load
from soda.loop.run import run_iteration
from soda.loop.session import Session
from tests.fakeapi import FakeAPI, Reply, tool_use_response

CALC = (Path(soda.__file__).parent / "demo" / "sample" / "calc.py").read_text()
GOAL = 0.85
"""Of all input tokens, and of ORIENT's, from the run's second iteration on."""
AGENT_GOAL = 0.80
"""Of each ORIENT agent's."""
ORIENT = ("verifier", "assessor", "planner")

SCRIPT = {
    "verifier": [
        call("run_tests"),
        call("read_file", path="calc.py", offset_line=None, max_lines=None),
        submit(VERIFIED),
    ],
    "assessor": [call("run_tests"), submit(NOT_MET)],
    "planner": [call("read_file", path="calc.py", offset_line=None, max_lines=None), plan],
    "executor": [
        lambda n: tool_use_response(
            "write_file", {"path": f"notes/n{n}.txt", "content": f"note {n}\n"}
        ),
        lambda n: tool_use_response(
            "read_file", {"path": f"notes/n{n}.txt", "offset_line": None, "max_lines": None}
        ),
        submit(EXECUTED),
    ],
}


def mature_responder() -> Callable[[dict[str, Any]], Reply]:
    """The SCRIPT's agents, working as the seeded history did: the verifier records
    a learning every fourth iteration, the planner opens a follow-up every third
    and works the oldest open task (instead of a new one) every third."""
    counts = {"verifier": 0, "planner": 0}
    plain = responder(SCRIPT)

    def respond(body: dict[str, Any]) -> Reply:
        agent = agent_of(body)
        if agent not in counts or turns(body) < len(SCRIPT[agent]) - 1:
            return plain(body)
        plain(body)  # counts the plan: the executor's note is named after it
        counts[agent] += 1
        n = counts[agent]
        if agent == "verifier":
            fact = [mature_history.learning(100_000 + n)] if n % 4 == 0 else []
            return tool_use_response("submit", {**VERIFIED, "learnings": fact})
        answer = plan(n).body["content"][0]["input"]
        if n % 3 == 1:
            title = f"Handle the {mature_history.topic(100_000 + n)} edge cases"
            answer["new_tasks"] = [{"title": title, "description": "later", "risk": "low"}]
        oldest = re.search(r"^open:\n- #(\d+) ", first_text(body), re.MULTILINE)
        if n % 3 == 0 and oldest:
            answer["iteration_plan"]["tasks"][0]["task_id"] = int(oldest.group(1))
        return tool_use_response("submit", answer)

    return respond


def calc_with(n: int) -> str:
    """The demo's calc.py with `n` more functions, one a merged iteration."""
    added = "".join(
        f'\n\ndef step_{k}(a: float, b: float) -> float:\n    """Step {k}."""\n    return a + b\n'
        for k in range(1, n + 1)
    )
    return CALC + added


def first_text(body: dict[str, Any]) -> str:
    """The text of the first user message (the inputs)."""
    return "".join(b.get("text", "") for b in body["messages"][0]["content"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--iterations", type=int, default=5)
    parser.add_argument("--history", type=int, default=0, help="past iterations seeded first")
    parser.add_argument("--sandbox", choices=["bwrap", "none"], default=None)
    parser.add_argument("--calls", action="store_true", help="also list every call")
    parser.add_argument(
        "--planner-maps", action="store_true", help="the planner calls repo_map, not read_file"
    )
    parser.add_argument(
        "--fast",
        default="claude-sonnet-4-6",
        help="the fast tier's model (the verifier's); soda's default is claude-haiku-4-5",
    )
    parser.add_argument(
        "--executor-edits", action="store_true", help="the executor adds a function to calc.py"
    )
    args = parser.parse_args()
    if args.planner_maps:
        SCRIPT["planner"] = [call("repo_map", path=None), plan]
    if args.executor_edits:
        SCRIPT["executor"][0] = lambda n: tool_use_response(
            "write_file", {"path": "calc.py", "content": calc_with(n)}
        )
        SCRIPT["executor"][1] = call("read_file", path="calc.py", offset_line=None, max_lines=None)
    fake = FakeAPI()
    fake.simulate_cache = True
    fake.respond = mature_responder() if args.history else responder(SCRIPT)
    fake.start()
    try:
        with tempfile.TemporaryDirectory(prefix="soda-bench-") as tmp:
            path = anthropic_project(Path(tmp) / "project", fake, args.iterations)
            text = path.read_text().replace('fast = "claude-sonnet-4-6"', f'fast = "{args.fast}"')
            if args.sandbox:
                text = text.replace('mode = "bwrap"', f'mode = "{args.sandbox}"')
            path.write_text(text)
            session = Session.open(load(path))
            if args.history:
                started = time.perf_counter()
                mature_history.seed(session, args.history)
                took = time.perf_counter() - started
                print(f"seeded {args.history:,} past iterations in {took:.0f}s")
            for _ in range(args.iterations):
                result = run_iteration(session, lambda line: None)
                if result.ending.name not in ("CONTINUE",):
                    print(f"the run ended early: {result.ending.name} {result.reason}")
                    break
            report(session, args.calls)
    finally:
        fake.close()


def report(session: Session, calls: bool) -> None:
    rows = session.db.execute(
        "SELECT i.number, c.agent, c.turn, c.input_tokens, c.cache_creation_tokens,"
        " c.cache_read_tokens FROM agent_calls c JOIN iterations i ON i.id = c.iteration_id"
        " WHERE i.run_id = ? ORDER BY c.id",
        [session.run_id],
    ).fetchall()
    by_iteration: dict[int, list[Call]] = {}
    for number, *made in rows:
        if calls:
            agent, turn, fresh, written, read = made
            print(
                f"  {number} {agent:<9} turn {turn} input {fresh:>6,} written {written:>6,}"
                f" read {read:>6,}"
            )
        by_iteration.setdefault(number, []).append(tuple(made))  # type: ignore[arg-type]
    print("iteration  calls  input tokens  written    read  share read  (ORIENT / executor)")
    for number, made in sorted(by_iteration.items()):
        orient = _share([c for c in made if c[0] in ORIENT])
        execute = _share([c for c in made if c[0] == "executor"])
        print(
            f"{number:>9}  {len(made):>5}  {_total(made):>12,}  {sum(c[3] for c in made):>7,}"
            f"  {sum(c[4] for c in made):>6,}  {_share(made):>10.1%}"
            f"  ({orient:.1%} / {execute:.1%})"
        )
    later = [c for number in sorted(by_iteration)[1:] for c in by_iteration[number]]
    if not later:
        return
    print(
        "from the run's second iteration on (its first writes the cache), read from the cache:"
        "\n            every turn                              first turns (the inputs alone)"
    )
    groups = [(agent, lambda c, a=agent: c[0] == a, AGENT_GOAL) for agent in ORIENT]
    groups += [
        ("ORIENT", lambda c: c[0] in ORIENT, GOAL),
        ("executor", lambda c: c[0] == "executor", None),
        ("all", lambda c: True, GOAL),
    ]
    for name, chosen, goal in groups:
        made = [c for c in later if chosen(c)]
        first = [c for c in made if c[1] == 1]
        if made:
            print(f"  {name:<9} {_verdict(made, goal):<40}{_verdict(first, None)}")


def _verdict(calls: list[Call], goal: float | None) -> str:
    share = _share(calls)
    said = f"{_total(calls):>8,} tokens {share:>6.1%}"
    if goal is None:
        return said
    return f"{said} {share / goal:.3f}x {'met' if share >= goal else 'MISSED'}"


Call = tuple[str, int, int, int, int]
"""agent, turn, uncached input tokens, tokens written to the cache, tokens read from it."""


def _total(calls: list[Call]) -> int:
    return sum(f + w + r for *_, f, w, r in calls)


def _share(calls: list[Call]) -> float:
    total = _total(calls)
    return sum(c[-1] for c in calls) / total if total else 0.0


if __name__ == "__main__":
    sys.exit(main())
