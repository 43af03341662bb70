"""Agents are data: `agents/NAME.md` is a TOML header (contract, tools, model
tier, inputs) and a prompt. Loading one, the terminal tools every agent gets
(`submit` with its contract as input schema, and `cannot_complete` for those
that may give up), and how its inputs are rendered into the first message."""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel

from soda.contracts import load_schema
from soda.errors import StructuralError
from soda.llm.base import ToolSpec
from soda.resources import resource_dir

SUBMIT = "submit"
GIVE_UP = "cannot_complete"


@dataclass(frozen=True)
class Agent:
    """One agent, as declared by its file in agents/."""

    name: str
    contract: str
    tools: Literal["none", "read_only", "worktree"]
    tier: Literal["strong", "fast"]
    inputs: tuple[str, ...]
    system: str
    can_give_up: bool = False


@cache
def load_agent(name: str) -> Agent:
    """Read agents/NAME.md: TOML front matter between `+++` lines, then the prompt."""
    path = resource_dir("agents") / f"{name}.md"
    try:
        text = path.read_text(encoding="utf-8")
        _, header, body = text.split("+++", 2)
        meta = tomllib.loads(header)
        return Agent(
            name=meta["name"],
            contract=meta["contract"],
            tools=meta["tools"],
            tier=meta["tier"],
            inputs=tuple(meta["inputs"]),
            system=body.strip(),
            can_give_up=bool(meta.get("can_give_up", False)),
        )
    except (OSError, ValueError, KeyError, tomllib.TOMLDecodeError) as exc:
        raise StructuralError(f"agent definition {path} is unreadable: {exc}") from exc


def terminal_tools(agent: Agent) -> list[ToolSpec]:
    schema = {k: v for k, v in load_schema(agent.contract).items() if not k.startswith("$id")}
    schema.pop("$schema", None)
    schema.pop("title", None)
    tools = [
        ToolSpec(
            name=SUBMIT,
            description=(
                f"Give your final answer ({agent.contract} contract). "
                "Call this exactly once, when you are done; it ends your turn."
            ),
            input_schema=schema,
        )
    ]
    if agent.can_give_up:
        tools.append(
            ToolSpec(
                name=GIVE_UP,
                description=(
                    "Stop without finishing: say what blocks you and what would unblock it."
                ),
                input_schema={
                    "type": "object",
                    "properties": {"reason": {"type": "string"}},
                    "required": ["reason"],
                    "additionalProperties": False,
                },
            )
        )
    return tools


def render_inputs(agent: Agent, inputs: dict[str, Any]) -> str:
    """The first user message: each declared input under its own heading."""
    missing = [name for name in agent.inputs if name not in inputs]
    if missing:
        raise StructuralError(f"agent {agent.name} needs inputs {missing} that were not given")
    extras = [name for name in inputs if name not in agent.inputs]
    parts = []
    # Declared inputs first and in their order (a stable, cacheable prefix), then
    # anything situational such as feedback on a rejected plan.
    for name in (*agent.inputs, *extras):
        value = inputs[name]
        if isinstance(value, BaseModel):
            value = value.model_dump(mode="json")
        if not isinstance(value, str):
            value = json.dumps(value, indent=2, ensure_ascii=False)
        parts.append(f"## {name.replace('_', ' ').title()}\n\n{value.strip()}")
    return "\n\n".join(parts) + "\n\nWork with your tools, then call `submit`."
