"""Building blocks of scripted model responses (see soda/llm/scripted.py)."""

from __future__ import annotations

from typing import Any


def submit(agent: str, data: dict[str, Any]) -> dict[str, Any]:
    """A response in which `agent` calls its terminal `submit` tool with `data`."""
    return {"agent": agent, "tool_calls": [{"name": "submit", "input": data}]}


VERIFIED = submit(
    "verifier",
    {
        "checks": [],
        "task_updates": [],
        "learnings": [],
        "summary": "checked",
        "learning_verdicts": [],
    },
)
NOT_MET = submit(
    "assessor",
    {"spec_satisfied": False, "confidence": "high", "gaps": [], "summary": "not met"},
)
