"""Agents are data: `agents/NAME.md` is a TOML header (contract, tools, model
tier, inputs) and a prompt. Loading one, the terminal tools every agent gets
(`submit` with its contract as input schema, and `cannot_complete` for those
that may give up), and how its inputs are rendered into the first message.

The first message is ordered for the prompt cache, most stable first: the
stable inputs (the header's `stable` list, by default the spec); then what lasts
of the other inputs (an input with `prompt_parts()`: the planner's repository
map, its listing; the claims' learnings, then their standing work), under the
input's heading; then the rest in declared order (the parts that change every
iteration as "## Claims (continued)", "## Repo Map (continued)"), situational
inputs last. The message says where each stable input and each lasting part
ends (`Message.cache_breaks`), so a provider can cache each apart from what
changes after it (with more parts than it has markers, the shortest share the
next one's: `fewest_breaks`). Stable inputs are listed most lasting first: the
executor's spec and guidance outlast its learnings, which outlast the
iteration's plan (the same for every task of the iteration). Values render compactly: an object with
`prompt_text()` as that text, other structures as one-line JSON. The message
ends with what the agent is to do next, in terms of what it has
(`closing_line`): a tool-less agent (answered in JSON mode) is told to answer
with the JSON object, not to use tools or call `submit`.

An agent knows its output type, in the spirit of pydantic-ai's `Agent[Deps,
Output]`: `load_agent("verifier", Verification)` is an `Agent[Verification]`,
and running it gives an `Answer[Verification]`. Loading checks that the type
given is the model of the contract the file declares (a StructuralError names
both otherwise); without a type, the agent is typed by the base `Contract`."""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from functools import cache
from typing import Any, Generic, Literal, TypeVar, overload

from pydantic import BaseModel

from soda.config.resources import resource_dir
from soda.contracts import CONTRACTS, Contract, load_schema
from soda.errors import StructuralError
from soda.llm.base import Message, ToolSpec

SUBMIT = "submit"
GIVE_UP = "cannot_complete"

OutputT = TypeVar("OutputT", bound=Contract, covariant=True)
"""The model an agent's answer is validated into (its contract's)."""
T = TypeVar("T", bound=Contract)


@dataclass(frozen=True)
class Agent(Generic[OutputT]):
    """One agent, as declared by its file in agents/, with its output type."""

    name: str
    contract: str
    output_type: type[OutputT]
    """The pydantic model of `contract`: what `submit` is validated into."""
    tools: Literal["none", "read_only", "worktree"]
    tier: Literal["strong", "fast"]
    inputs: tuple[str, ...]
    system: str
    can_give_up: bool = False
    stable: tuple[str, ...] = ("spec",)
    """Inputs that do not change from one iteration to the next: rendered first,
    as the cacheable part of the first message."""
    optional: tuple[str, ...] = ()
    """Inputs that may be absent (the repository's guidance, when it has none)."""


@overload
def load_agent(name: str) -> Agent[Contract]: ...


@overload
def load_agent(name: str, output_type: type[T]) -> Agent[T]: ...


def load_agent(name: str, output_type: type[Contract] | None = None) -> Agent[Contract]:
    """Read agents/NAME.md: TOML front matter between `+++` lines, then the prompt.

    `output_type` must be the model of the contract the file declares (StructuralError
    naming both otherwise); without it the agent is typed by the base Contract."""
    agent = _load(name)
    if output_type is not None and output_type is not agent.output_type:
        raise StructuralError(
            f"agent {name} declares contract {agent.contract!r} "
            f"({agent.output_type.__name__}), but was loaded as {output_type.__name__}"
        )
    return agent


@cache
def _load(name: str) -> Agent[Contract]:
    path = resource_dir("agents") / f"{name}.md"
    try:
        text = path.read_text(encoding="utf-8")
        _, header, body = text.split("+++", 2)
        meta = tomllib.loads(header)
        return Agent(
            name=meta["name"],
            contract=meta["contract"],
            output_type=_model(meta["contract"]),
            tools=meta["tools"],
            tier=meta["tier"],
            inputs=tuple(meta["inputs"]),
            system=body.strip(),
            can_give_up=bool(meta.get("can_give_up", False)),
            stable=tuple(n for n in meta.get("stable", ["spec"]) if n in meta["inputs"]),
            optional=tuple(meta.get("optional", [])),
        )
    except (OSError, ValueError, KeyError, tomllib.TOMLDecodeError) as exc:
        raise StructuralError(f"agent definition {path} is unreadable: {exc}") from exc


def _model(contract: str) -> type[Contract]:
    if contract not in CONTRACTS:
        raise ValueError(f"unknown contract {contract!r}; known: {', '.join(sorted(CONTRACTS))}")
    return CONTRACTS[contract]


def terminal_tools(agent: Agent[Contract]) -> list[ToolSpec]:
    schema = {k: v for k, v in load_schema(agent.contract).items() if not k.startswith("$id")}
    schema.pop("$schema", None)
    schema.pop("title", None)
    tools = [
        ToolSpec(
            name=SUBMIT,
            description=(
                f"Give your final answer ({agent.contract} contract), once, when you are "
                "done. Other calls in the same turn run first; if one of them fails, the "
                "answer is not taken and you go on."
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


def render_inputs(agent: Agent[Contract], inputs: dict[str, Any]) -> str:
    """The first user message's text (see `first_message`)."""
    return first_message(agent, inputs).text


def first_message(agent: Agent[Contract], inputs: dict[str, Any]) -> Message:
    """The first user message: each input under its own heading, most stable
    first (see the module's docstring), `cache_breaks` at the end of each stable
    input and of each lasting part."""
    missing = [n for n in agent.inputs if n not in inputs and n not in agent.optional]
    if missing:
        raise StructuralError(f"agent {agent.name} needs inputs {missing} that were not given")
    stable = [name for name in agent.stable if name in inputs]
    declared = [name for name in agent.inputs if name not in stable and name in inputs]
    # Then anything situational, such as feedback on a rejected plan.
    others = [*declared, *(name for name in inputs if name not in agent.inputs)]
    text, breaks = "", []
    for name in stable:  # each a part: the spec outlasts an executor's plan
        text += _section(name, inputs[name])
        breaks.append(len(text))
    tail = ""
    for name in others:
        *lasting, changing = _parts(inputs[name])
        kept = [part.strip() for part in lasting if part.strip()]
        if not kept:
            tail += _section(name, changing)
            continue
        text += f"## {_title(name)}\n\n"
        for part in kept:
            text += f"{part}\n\n"
            breaks.append(len(text))
        if changing.strip():
            tail += f"## {_title(name)} (continued)\n\n{changing.strip()}\n\n"
    return Message(
        role="user",
        text=text + tail + closing_line(agent),
        cache_breaks=tuple(sorted({n for n in breaks if n > 0})),
    )


def closing_line(agent: Agent[Contract]) -> str:
    """The first message's last line: what to do, with what the agent has."""
    if agent.tools == "none":
        return (
            f"Answer with one JSON object that follows the {agent.contract} schema, and "
            "nothing else."
        )
    if agent.can_give_up:
        return (
            "Work with your tools. When the task is done and its tests pass, call `submit` "
            "alone in a turn of its own; if you cannot finish it, call `cannot_complete`."
        )
    return (
        "Look with your read-only tools, then call `submit` once, alone in a turn of its "
        "own, with your answer."
    )


def _section(name: str, value: Any) -> str:
    return f"## {_title(name)}\n\n{_text(value).strip()}\n\n"


def _title(name: str) -> str:
    return name.replace("_", " ").title()


def _parts(value: Any) -> tuple[str, ...]:
    """An input in parts, most lasting first, the last one what changes every
    iteration: an object with `prompt_parts()` (the claims, a map) in its own, any
    other value whole, as one part that changes."""
    if hasattr(value, "prompt_parts"):
        return tuple(str(part) for part in value.prompt_parts())
    return (_text(value),)


def _text(value: Any) -> str:
    if hasattr(value, "prompt_text"):
        value = value.prompt_text()
    elif isinstance(value, BaseModel):
        value = value.model_dump(mode="json", exclude_none=True)
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
