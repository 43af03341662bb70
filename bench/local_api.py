"""Shared by the prompt benches: the demo project on the Anthropic provider,
pointed at the local Messages-API server of the tests (tests/fakeapi.py), and a
behavioural fake model answering there from the request (which agent asks, how
many turns it has taken). Nothing here reaches the network."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.fakeapi

from soda.agent.definition import load_agent
from soda.cli.demo import prepare
from tests.fakeapi import FakeAPI, Reply, tool_use_response

AGENTS = ("verifier", "assessor", "planner", "orienter", "executor", "planning_mode")


def anthropic_project(directory: Path, fake: FakeAPI, max_iterations: int = 50) -> Path:
    """The demo project switched from the scripted provider to Anthropic at `fake`;
    returns its config path."""
    os.environ.setdefault("ANTHROPIC_API_KEY", "sk-bench-not-real")
    path = prepare(directory)
    text = path.read_text()
    for old, new in (
        ('provider = "scripted"', 'provider = "anthropic"'),
        ('strong = "scripted"', 'strong = "claude-sonnet-4-6"'),
        ('fast = "scripted"', 'fast = "claude-sonnet-4-6"'),
        ("# base_url = (not set)", f'base_url = "{fake.url}"'),
    ):
        text = text.replace(old, new)
    text = re.sub(r"(?m)^max_iterations = \d+$", f"max_iterations = {max_iterations}", text)
    path.write_text(text)
    return path


def agent_of(body: dict[str, Any]) -> str:
    """Which agent a request comes from, by its system prompt."""
    system = (body.get("system") or [{"text": ""}])[0]["text"]
    return next((name for name in AGENTS if load_agent(name).system == system), "unknown")


def turns(body: dict[str, Any]) -> int:
    """How many turns the agent has taken in this session."""
    return sum(1 for message in body.get("messages", []) if message["role"] == "assistant")


Script = dict[str, list[Callable[[int], Reply]]]
"""Per agent, one reply per turn; the iteration's number is given (the planner's
intents must differ, or loop detection steps in)."""


def responder(script: Script) -> Callable[[Any], Reply]:
    planned = {"count": 0}

    def respond(body: Any) -> Reply:
        agent = agent_of(body)
        replies = script[agent]
        turn = min(turns(body), len(replies) - 1)
        if agent == "planner" and turn == len(replies) - 1:
            planned["count"] += 1
        return replies[turn](planned["count"])

    return respond


def submit(data: dict[str, Any]) -> Callable[[int], Reply]:
    return lambda n: tool_use_response("submit", data)


def call(name: str, **arguments: Any) -> Callable[[int], Reply]:
    return lambda n: tool_use_response(name, arguments)


VERIFIED = {
    "checks": [],
    "task_updates": [],
    "learnings": [],
    "summary": "claims hold",
    "learning_verdicts": [],
}
NOT_MET = {
    "spec_satisfied": False,
    "confidence": "medium",
    "gaps": [],
    "summary": "subtract and divide are missing",
}


def plan(n: int) -> Reply:
    task = {
        "id": "a",
        "task_id": None,
        "title": f"Write note {n}",
        "description": f"Add notes/n{n}.txt with one line.",
        "depends_on": [],
        "risk": "low",
        "tool_hints": [],
    }
    data = {
        "actionable_work_exists": True,
        "new_tasks": [],
        "stuck_reason": None,
        "learnings": [],
        "iteration_plan": {"intent": f"bench note {n}", "approach": "one file", "tasks": [task]},
    }
    return tool_use_response("submit", data)


EXECUTED = {
    "tasks_blocked": [],
    "task_comments": [],
    "new_subtasks": [],
    "learnings": [],
    "summary": "wrote the note",
}
