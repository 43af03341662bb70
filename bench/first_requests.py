"""Every agent's first request, with its answer's share, against a small context
window: `soda demo`'s project on the Anthropic provider against the local
Messages-API server (tests/fakeapi.py), `[model] context_window` set to the
window (8,192 by default), one iteration run (verifier, assessor, planner,
executor: every tool call real, the change merged by the gate).

Printed per agent, from the requests the server received: the prompt (tools,
system prompt, messages; tokens ~ characters of the request's JSON / 4, as the
local server counts them), the tools' share of it, the answer budget
(`max_tokens`) and their sum against the window. The agents a run on this
project does not reach (the orienter of `orient_pattern = "single"`, the
planning-mode chooser, the retrier) are weighed as `soda doctor` weighs them:
system prompt, tools, the spec and 1,500 tokens for an iteration's inputs.
Goal: every agent's first request fits the window with its answer.
`--window 200000` shows the tools offered whole (a Claude model's window).

    python bench/first_requests.py [--window 8192]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from cache_share import SCRIPT
from local_api import agent_of, anthropic_project, responder, turns

from soda.cli.doctor import first_requests
from soda.config import load
from soda.loop.run import run_iteration
from soda.loop.session import Session
from tests.fakeapi import FakeAPI
from tests.fakecache import CHARS_PER_TOKEN

WINDOW = 8192


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=int, default=WINDOW, help="model.context_window")
    args = parser.parse_args()
    fake = FakeAPI()
    fake.respond = responder(SCRIPT)
    fake.start()
    try:
        with tempfile.TemporaryDirectory(prefix="soda-bench-") as tmp:
            path = anthropic_project(Path(tmp) / "project", fake, 1)
            text = path.read_text().replace('mode = "bwrap"', 'mode = "none"')
            text = re.sub(
                r"(?m)^# context_window = \(not set\)$", f"context_window = {args.window}", text
            )
            path.write_text(text)
            config = load(path)
            session = Session.open(config)
            result = run_iteration(session, lambda line: None)
            print(f"one iteration on a {args.window:,}-token window: {result.ending.name}")
            bodies = [r.body for r in fake.requests]
            estimated = {e.agent: e for e in first_requests(config)}
    finally:
        fake.close()
    print("agent           prompt   tools  answer    total  of window")
    met = True
    seen = set()
    for body in bodies:
        agent = agent_of(body)
        if turns(body) or agent in seen:
            continue
        seen.add(agent)
        prompt, tools = _tokens(body), _tokens({"tools": body.get("tools", [])})
        total = prompt + body["max_tokens"]
        met &= total <= args.window
        print(
            f"{agent:<13} {prompt:>8,} {tools / prompt:>6.0%} {body['max_tokens']:>7,}"
            f" {total:>8,}  {total / args.window:>8.1%} {_verdict(total, args.window)}"
        )
    for name, first in sorted(estimated.items()):
        if name in seen:
            continue
        total = first.needed
        met &= total <= args.window
        print(
            f"{name:<13} {first.prompt:>8,}      -- {first.limits.answer_tokens:>7,}"
            f" {total:>8,}  {total / args.window:>8.1%} {_verdict(total, args.window)}"
            " (doctor's estimate)"
        )
    print(
        f"goal: every first request fits {args.window:,} tokens with its answer: "
        f"{'met' if met else 'MISSED'}"
    )
    return 0


def _tokens(body: dict[str, Any]) -> int:
    """Tokens of a request's prompt as the local server counts them."""
    parts = [body.get("tools") or [], body.get("system") or [], body.get("messages") or []]
    return sum(len(json.dumps(part)) for part in parts) // CHARS_PER_TOKEN


def _verdict(total: int, window: int) -> str:
    return "fits" if total <= window else "DOES NOT FIT"


if __name__ == "__main__":
    sys.exit(main())
