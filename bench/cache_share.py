"""Share of input tokens readable from the prompt cache, per iteration, over a
5-iteration run on the Anthropic provider against the local Messages-API server
(tests/fakeapi.py with `simulate_cache`: a prefix up to a cache marker an
earlier request wrote is read back, as the API does; tokens ~ characters / 4).

The model is a behavioural fake that works like a careful one: the verifier
runs the tests and reads a file, the assessor runs the tests, the planner looks
at the repository map and plans one task, the executor writes a file, reads it
back and submits. Every tool call is real (the tests run in the jail, the gate
merges each change). Goal: >= 80% of input tokens from the cache from
iteration 2 on.

    python bench/cache_share.py [-n 5] [--sandbox bwrap|none]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from local_api import (
    EXECUTED,
    NOT_MET,
    VERIFIED,
    anthropic_project,
    call,
    plan,
    responder,
    submit,
)

from soda.config import load
from soda.loop.run import run_iteration
from soda.loop.session import Session
from tests.fakeapi import FakeAPI, tool_use_response

GOAL = 0.80

SCRIPT = {
    "verifier": [
        call("run_tests"),
        call("read_file", path="calc.py", offset_line=None, max_lines=None),
        submit(VERIFIED),
    ],
    "assessor": [call("run_tests"), submit(NOT_MET)],
    "planner": [call("repo_map", path=None), plan],
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--iterations", type=int, default=5)
    parser.add_argument("--sandbox", choices=["bwrap", "none"], default=None)
    parser.add_argument("--calls", action="store_true", help="also list every call")
    args = parser.parse_args()
    fake = FakeAPI()
    fake.simulate_cache = True
    fake.respond = responder(SCRIPT)
    fake.start()
    try:
        with tempfile.TemporaryDirectory(prefix="soda-bench-") as tmp:
            path = anthropic_project(Path(tmp) / "project", fake, args.iterations)
            if args.sandbox:
                text = path.read_text().replace('mode = "bwrap"', f'mode = "{args.sandbox}"')
                path.write_text(text)
            session = Session.open(load(path))
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
        "SELECT i.number, c.agent, c.input_tokens, c.cache_creation_tokens, c.cache_read_tokens"
        " FROM agent_calls c JOIN iterations i ON i.id = c.iteration_id ORDER BY c.id"
    ).fetchall()
    by_iteration: dict[int, list[tuple[str, int, int, int]]] = {}
    for number, agent, fresh, written, read in rows:
        if calls:
            print(f"  {number} {agent:<9} input {fresh:>6,} written {written:>6,} read {read:>6,}")
        by_iteration.setdefault(number, []).append((agent, fresh, written, read))
    print("iteration  calls  input tokens  written  read   share read  (ORIENT / executor)")
    shares = []
    for number, calls in sorted(by_iteration.items()):
        share = _share(calls)
        orient = _share([c for c in calls if c[0] != "executor"])
        execute = _share([c for c in calls if c[0] == "executor"])
        total = sum(f + w + r for _, f, w, r in calls)
        print(
            f"{number:>9}  {len(calls):>5}  {total:>12,}  {sum(c[2] for c in calls):>7,}"
            f"  {sum(c[3] for c in calls):>6,}  {share:>9.0%}  ({orient:.0%} / {execute:.0%})"
        )
        if number > 1:
            shares.append(share)
    if shares:
        worst = min(shares)
        verdict = "meets" if worst >= GOAL else "misses"
        print(f"from iteration 2 on: lowest share {worst:.0%} ({verdict} the goal {GOAL:.0%})")


def _share(calls: list[tuple[str, int, int, int]]) -> float:
    total = sum(f + w + r for _, f, w, r in calls)
    return sum(r for *_, r in calls) / total if total else 0.0


if __name__ == "__main__":
    sys.exit(main())
