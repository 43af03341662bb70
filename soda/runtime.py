"""Running an agent: render its prompt, drive the model's tool loop, validate the answer.

An agent is data (see `agents/*.md`): a name, a system prompt, an output
contract, a tool set and a model tier. `AgentRunner.run` offers the agent's
tools plus the terminal `submit` tool (whose input schema is the contract), feeds
tool results back until the model submits, and validates the submission against
the contract. A violation is structural: it raises ContractViolation and is never
retried, because a model that could not follow the contract once is a prompt or
schema problem for a person to look at. Every model call is handed to a
`CallRecorder`, which stores it in `agent_calls` and enforces the budget.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal, Protocol

from pydantic import BaseModel
from sqlite_utils import Database

from soda.config import Config
from soda.contracts import Contract, load_schema, validate
from soda.errors import (
    BudgetExhausted,
    ContractViolation,
    Interrupted,
    ModelStopped,
    StructuralError,
    Violation,
)
from soda.events import Events
from soda.llm.base import Message, Model, ModelRequest, ModelResponse, ToolResult, ToolSpec
from soda.resources import resource_dir
from soda.store import agent_calls

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


class Toolset(Protocol):
    """What the runner needs from a toolbox (see soda.tools)."""

    def specs(self) -> list[ToolSpec]: ...

    def call(self, name: str, arguments: dict[str, Any]) -> Any: ...


class Recorder(Protocol):
    def __call__(self, agent: str, response: ModelResponse, turn: int) -> None: ...


@dataclass
class Answer:
    """What an agent run produced: a validated output, or the reason it gave up."""

    output: Contract | None
    gave_up: str | None
    turns: int


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


class AgentRunner:
    def __init__(self, model: Model, config: Config, record: Recorder) -> None:
        self.model = model
        self.config = config
        self.record = record
        self.should_stop: Callable[[], bool] = lambda: False
        """Checked before every model call: the safe point where a signal takes effect."""

    def run(self, agent: Agent, inputs: dict[str, Any], toolbox: Toolset | None) -> Answer:
        tools = (toolbox.specs() if toolbox else []) + terminal_tools(agent)
        messages = [Message(role="user", text=render_inputs(agent, inputs))]
        model_id = self.config.model.strong if agent.tier == "strong" else self.config.model.fast
        for turn in range(1, self.config.model.max_turns + 1):
            if self.should_stop():
                raise Interrupted(f"stopped before turn {turn} of agent {agent.name}")
            request = ModelRequest(
                agent=agent.name,
                model=model_id,
                system=agent.system,
                messages=list(messages),
                tools=tools,
                answer_tool=SUBMIT,
                max_tokens=self.config.model.max_tokens,
            )
            response = self.model.complete(request)
            self.record(agent.name, response, turn)
            if not response.tool_calls:
                raise ModelStopped(
                    "no_answer",
                    f"agent {agent.name} ended turn {turn} without calling a tool "
                    f"(stop_reason {response.stop_reason})",
                    raw=response.raw,
                )
            messages.append(
                Message(role="assistant", text=response.text, tool_calls=response.tool_calls)
            )
            answer = self._terminal(agent, response, turn)
            if answer is not None:
                return answer
            results = [
                self._call_tool(toolbox, call.id, call.name, call.input)
                for call in response.tool_calls
            ]
            messages.append(Message(role="user", tool_results=results))
        raise ModelStopped(
            "turn_limit",
            f"agent {agent.name} did not submit within {self.config.model.max_turns} turns "
            "(model.max_turns)",
        )

    def _terminal(self, agent: Agent, response: ModelResponse, turn: int) -> Answer | None:
        for call in response.tool_calls:
            if call.name == GIVE_UP and agent.can_give_up:
                return Answer(output=None, gave_up=str(call.input.get("reason", "")), turns=turn)
            if call.name == SUBMIT:
                result = validate(agent.contract, call.input)
                if isinstance(result, Violation):
                    raise ContractViolation(result, raw=call.input, agent=agent.name)
                return Answer(output=result, gave_up=None, turns=turn)
        return None

    @staticmethod
    def _call_tool(
        toolbox: Toolset | None, call_id: str, name: str, arguments: dict[str, Any]
    ) -> ToolResult:
        if toolbox is None:
            return ToolResult(call_id, f"unknown tool {name!r}", is_error=True)
        outcome = toolbox.call(name, arguments)
        return ToolResult(call_id, outcome.content, is_error=outcome.is_error)


class CallRecorder:
    """Stores every model call in agent_calls, keeps the iteration's totals, and
    stops the run (BudgetExhausted) once a [budget] limit is passed."""

    def __init__(self, db: Database, config: Config, provider: str, events: Events) -> None:
        self.db = db
        self.config = config
        self.provider = provider
        self.events = events
        self.run_id: int | None = None
        self.iteration_id: int | None = None
        self.reset()

    def reset(self) -> None:
        self.tokens_in = 0
        self.tokens_out = 0
        self.cost_usd = 0.0

    def __call__(self, agent: str, response: ModelResponse, turn: int) -> None:
        usage = response.usage
        cost = usage.cost(self.config.model.prices.get(response.model))
        agent_calls.record(
            self.db, self.run_id, self.iteration_id, agent, self.provider, turn, response, cost
        )
        self.tokens_in += usage.input_tokens + usage.cache_creation_tokens + usage.cache_read_tokens
        self.tokens_out += usage.output_tokens
        self.cost_usd += cost
        self._check_budget()

    def run_cost(self) -> float:
        return agent_calls.run_cost(self.db, self.run_id)

    def _check_budget(self) -> None:
        budget = self.config.budget
        spent = self.run_cost()
        if spent > budget.max_cost_usd:
            raise BudgetExhausted(
                f"budget exhausted: spent ${spent:.4f} of max_cost_usd ${budget.max_cost_usd:.4f} "
                "([budget] in soda.toml); raise it to continue"
            )
        tokens = self.tokens_in + self.tokens_out
        if tokens > budget.max_tokens_per_iteration:
            raise BudgetExhausted(
                f"budget exhausted: this iteration used {tokens:,} tokens, over "
                f"max_tokens_per_iteration {budget.max_tokens_per_iteration:,} "
                "([budget] in soda.toml)"
            )
