"""Running an agent: render its prompt, drive the model's tool loop, validate the answer.

An agent is data (see `agents/*.md`): a name, a system prompt, an output
contract, a tool set and a model tier. `AgentRunner.run` offers the agent's
tools plus the terminal `submit` tool (whose input schema is the contract), feeds
tool results back until the model submits, and validates the submission against
the contract. A violation is structural: it raises ContractViolation and is never
retried, because a model that could not follow the contract once is a prompt or
schema problem for a person to look at. Every model call is handed to a
`CallRecorder`, which stores it in `agent_calls` and enforces the budget.

A real model's ordinary failures go back to it, once each (events
`agent.soft_failure`), and only a second failure gives up (`ModelGaveUp`, never
a HALT; an executor's task ends as given up instead):

- out of turns (model.max_turns): one last turn asks for the answer alone;
- cut off at max_tokens with no whole tool call: the call is made again with the
  limit doubled, up to the model's maximum, and the raised limit holds for the
  rest of the run;
- a turn without a tool call: the model is told to call one;
- a prompt past the context window: older tool results become one-line notes
  (what was called, how long the result was) and the call is made again.

Context stays bounded (`[context]`): every tool result is clipped to
`tool_result_chars` (head and tail, with a note of the cut), and once an
executor session's estimated size passes `executor_session_tokens` its older
tool results become one-line summaries, the latest KEEP_WHOLE kept whole (event
`agent.condensed`). Each run is framed by `agent.start` and `agent.end` events.

Typed: an `Agent[Verification]` (see `load_agent`) runs to an
`Answer[Verification]`, its output validated into the agent's own model.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Generic, Protocol

from soda.agent.condense import condense, estimated_tokens, history_size
from soda.agent.definition import GIVE_UP, SUBMIT, Agent, OutputT, T, first_message, terminal_tools
from soda.config import Config, LiveConfig
from soda.contracts import Contract, validate
from soda.errors import (
    ContractViolation,
    Interrupted,
    ModelGaveUp,
    PromptTooLong,
    StructuralError,
    Violation,
)
from soda.llm.base import (
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    ToolResult,
    ToolSpec,
    raised_limit,
    safe_response,
)
from soda.tools.toolbox import Suspended, clip_result

KEEP_WHOLE = 3
"""Messages of tool results, the latest ones, that condensing for the session
budget leaves whole: what the model is working on right now."""
NO_TOOL_CALL = (
    "You ended your turn without calling a tool. Every turn must be a tool call: "
    "keep working with your tools, or call `submit` with your final answer."
)


class Toolset(Protocol):
    """What the runner needs from a toolbox (see soda.tools)."""

    def specs(self) -> list[ToolSpec]: ...

    def call(self, name: str, arguments: dict[str, Any]) -> Any: ...


class Recorder(Protocol):
    def __call__(
        self, agent: str, response: ModelResponse, turn: int, request: ModelRequest | None = None
    ) -> None:
        """Record one call (and, with `model.log_requests`, what it was sent)."""

    def note(self, agent: str, failure: str, data: dict[str, Any]) -> None:
        """A soft failure handed back to the model (see the module docstring)."""

    def event(self, kind: str, data: dict[str, Any]) -> None:
        """An agent run's own event: `agent.start`, `agent.end` (the live view),
        `agent.condensed`."""


@dataclass(frozen=True)
class Answer(Generic[OutputT]):
    """What an agent run produced: a validated output, or the reason it gave up."""

    output: OutputT | None
    """None when the agent gave up, which only one that may give up (the
    executor) can do: any other's run answers or raises."""
    gave_up: str | None
    turns: int

    @property
    def value(self) -> OutputT:
        """The output of an agent that answered; StructuralError if it gave up
        (a caller's mistake: check `output` for an agent that may give up)."""
        if self.output is None:
            raise StructuralError(f"an answer was expected, but the agent gave up: {self.gave_up}")
        return self.output


@dataclass
class _Conversation(Generic[T]):
    """One agent run's moving parts: what is sent on the next turn."""

    agent: Agent[T]
    model: str
    tools: list[ToolSpec]
    messages: list[Message]
    max_tokens: int
    turn: int = 0
    """The turn being asked (for an Answer given up on the way)."""
    counted: int = 0
    """Tokens the model counted in its last exchange (prompt and answer)."""


class AgentRunner:
    def __init__(self, model: Model, config: Config | LiveConfig, record: Recorder) -> None:
        self.model = model
        self.live = LiveConfig.of(config)
        self.record = record
        self.should_stop: Callable[[], bool] = lambda: False
        """Checked before every model call: the safe point where a signal takes effect."""

    @property
    def config(self) -> Config:
        """The current config (a reload swaps it in `live`)."""
        return self.live.current

    def recording_to(self, record: Recorder) -> AgentRunner:
        """The same runner, recording its calls and events with `record` (an
        iteration's recorder, or a task's locked view of it)."""
        runner = copy.copy(self)
        runner.record = record
        return runner

    def run(
        self,
        agent: Agent[T],
        inputs: dict[str, Any],
        toolbox: Toolset | None,
        resume: list[Message] | None = None,
    ) -> Answer[T]:
        """The agent's validated answer. Raises ContractViolation when the answer
        breaks the contract, and ModelGaveUp when the model failed twice in an
        ordinary way; an agent that may give up (the executor) gets an Answer
        that says so instead."""
        conversation = _Conversation(
            agent=agent,
            model=self.config.model.strong if agent.tier == "strong" else self.config.model.fast,
            tools=(toolbox.specs() if toolbox else []) + terminal_tools(agent),
            # A run suspended by a tool (`Suspended`) goes on from its conversation.
            messages=list(resume) if resume else [first_message(agent, inputs)],
            max_tokens=self.config.model.max_tokens,
        )
        self.record.event(
            "agent.start", {"agent": agent.name, "tier": agent.tier, "model": conversation.model}
        )
        outcome = "error"
        try:
            answer = self._converse(conversation, toolbox)
            outcome = "answered" if answer.output is not None else "gave_up"
            return answer
        except ModelGaveUp as exc:
            outcome = "gave_up"
            if not agent.can_give_up:
                raise
            return Answer(output=None, gave_up=f"gave up: {exc}", turns=conversation.turn)
        finally:
            self.record.event(
                "agent.end", {"agent": agent.name, "turns": conversation.turn, "outcome": outcome}
            )

    def _converse(self, conversation: _Conversation[T], toolbox: Toolset | None) -> Answer[T]:
        agent, messages = conversation.agent, conversation.messages
        max_turns = self.config.model.max_turns
        reminded = False
        for turn in range(1, max_turns + 1):
            response = self._ask(conversation, turn)
            if not response.tool_calls:
                if reminded:
                    raise ModelGaveUp(
                        "no_tool_call",
                        f"no tool call: agent {agent.name} ended turn {turn} without calling "
                        f"a tool, again after being told to (stop_reason {response.stop_reason})",
                        raw=response.raw,
                    )
                reminded = True
                self.record.note(agent.name, "no_tool_call", {"turn": turn})
                if response.text:
                    messages.append(Message(role="assistant", text=response.text))
                _tell(messages, NO_TOOL_CALL)
                continue
            reminded = False
            messages.append(
                Message(role="assistant", text=response.text, tool_calls=response.tool_calls)
            )
            answer = self._terminal(agent, response, turn)
            if answer is not None:
                return answer
            results: list[ToolResult] = []
            for call in response.tool_calls:
                try:
                    results.append(self._call_tool(toolbox, call.id, call.name, call.input))
                except Suspended as pause:
                    pause.keep(list(messages), results, call.id)
                    raise
            messages.append(Message(role="user", tool_results=results))
            if agent.tools == "worktree":
                self._keep_within_budget(conversation)
        return self._last_turn(conversation, max_turns)

    def _keep_within_budget(self, conversation: _Conversation[T]) -> None:
        """Past [context] executor_session_tokens, older tool results become
        one-line summaries (the latest KEEP_WHOLE stay whole)."""
        agent, messages = conversation.agent, conversation.messages
        budget = self.config.context.executor_session_tokens
        before = estimated_tokens(agent.system, messages, conversation.counted)
        if before <= budget:
            return
        condensed = condense(messages, keep=KEEP_WHOLE)
        if condensed is None:
            return
        shorter, replaced = condensed
        messages[:] = shorter
        # The model's count was of the longer history; the next answer recounts.
        conversation.counted = 0
        self.record.event(
            "agent.condensed",
            {
                "agent": agent.name,
                "turn": conversation.turn,
                "budget_tokens": budget,
                "tokens_before": before,
                "tokens_after": estimated_tokens(agent.system, messages),
                "results_condensed": replaced,
            },
        )

    def _last_turn(self, conversation: _Conversation[T], max_turns: int) -> Answer[T]:
        """Out of turns: one more, in which only the answer (or giving up) counts."""
        agent = conversation.agent
        allowed = (SUBMIT, GIVE_UP) if agent.can_give_up else (SUBMIT,)
        self.record.note(agent.name, "turn_limit", {"turn": max_turns})
        _tell(conversation.messages, last_turn_prompt(agent, max_turns))
        response = self._ask(conversation, max_turns + 1, must_call=allowed)
        answer = self._terminal(agent, response, max_turns + 1)
        if answer is not None and answer.gave_up is not None:
            answer = replace(answer, gave_up=f"turn limit ({max_turns} turns): {answer.gave_up}")
        if answer is not None:
            return answer
        raise ModelGaveUp(
            "turn_limit",
            f"turn limit: agent {agent.name} did not submit within {max_turns} turns "
            "(model.max_turns), nor on one last turn that asked only for its answer",
            raw=response.raw,
        )

    def _ask(
        self, conversation: _Conversation[T], turn: int, must_call: tuple[str, ...] = ()
    ) -> ModelResponse:
        """One turn's model call, recorded, with its two second chances: a
        condensed history for a prompt too long, a higher limit for an answer cut
        off at max_tokens."""
        agent = conversation.agent
        condensed = raised = False
        while True:
            conversation.turn = turn
            if self.should_stop():
                raise Interrupted(f"stopped before turn {turn} of agent {agent.name}")
            request = ModelRequest(
                agent=agent.name,
                model=conversation.model,
                system=agent.system,
                messages=list(conversation.messages),
                tools=conversation.tools,
                answer_tool=SUBMIT,
                max_tokens=conversation.max_tokens,
                must_call=must_call,
                on_event=self.record.event,
            )
            try:
                response = self.model.complete(request)
            except PromptTooLong as exc:
                shorter = None if condensed else condense(conversation.messages, keep=1)
                if shorter is None:
                    why = (
                        "even with older tool results condensed"
                        if condensed
                        else "and has no older tool results to condense"
                    )
                    raise ModelGaveUp(
                        "prompt_too_long",
                        f"prompt too long: agent {agent.name}'s conversation exceeds the "
                        f"model's context {why} ({exc})",
                    ) from exc
                self.record.note(
                    agent.name,
                    "prompt_too_long",
                    {
                        "turn": turn,
                        "characters_before": history_size(conversation.messages),
                        "characters_after": history_size(shorter[0]),
                    },
                )
                conversation.messages[:] = shorter[0]
                condensed = True
                continue
            response = safe_response(response)
            self.record(agent.name, response, turn, request)
            usage = response.usage
            conversation.counted = (
                usage.input_tokens
                + usage.cache_creation_tokens
                + usage.cache_read_tokens
                + usage.output_tokens
            )
            if response.tool_calls or not response.truncated:
                return response
            higher = None if raised else raised_limit(conversation.model, conversation.max_tokens)
            if higher is None:
                why = "again after it was raised" if raised else "the most this model allows"
                raise ModelGaveUp(
                    "max_tokens",
                    f"max_tokens: agent {agent.name}'s answer was cut off at max_tokens = "
                    f"{conversation.max_tokens}, {why}",
                    raw=response.raw,
                )
            self.record.note(
                agent.name,
                "max_tokens",
                {"turn": turn, "max_tokens": conversation.max_tokens, "raised_to": higher},
            )
            conversation.max_tokens = higher
            raised = True

    def _terminal(self, agent: Agent[T], response: ModelResponse, turn: int) -> Answer[T] | None:
        for call in response.tool_calls:
            if call.name == GIVE_UP and agent.can_give_up:
                reason = str(call.input.get("reason", ""))
                return Answer(output=None, gave_up=reason, turns=turn)
            if call.name == SUBMIT:
                result = validate(agent.contract, call.input, agent.output_type)
                if isinstance(result, Violation):
                    raise ContractViolation(result, raw=call.input, agent=agent.name)
                return Answer(output=result, gave_up=None, turns=turn)
        return None

    def _call_tool(
        self, toolbox: Toolset | None, call_id: str, name: str, arguments: dict[str, Any]
    ) -> ToolResult:
        if toolbox is None:
            return ToolResult(call_id, f"unknown tool {name!r}", is_error=True)
        outcome = toolbox.call(name, arguments)
        content = clip_result(outcome.content, self.config.context.tool_result_chars)
        return ToolResult(call_id, content, is_error=outcome.is_error)


def last_turn_prompt(agent: Agent[Contract], max_turns: int) -> str:
    """What the model is told on the turn after its last one."""
    ask = (
        "call `submit` now if the task is done, or `cannot_complete` saying what is left"
        if agent.can_give_up
        else "call `submit` now with your final answer, from what you have found so far"
    )
    return (
        f"You have used all {max_turns} turns. No other tool will run: {ask}. "
        "This is your last turn."
    )


def _tell(messages: list[Message], text: str) -> None:
    """Say `text` to the model after the last message: in the last user turn when
    there is one (some chat templates refuse two user turns in a row)."""
    last = messages[-1]
    if last.role == "user":
        messages[-1] = replace(last, text=f"{last.text}\n\n{text}" if last.text else text)
    else:
        messages.append(Message(role="user", text=text))
