"""One agent run's turns: what the model is asked to do on each, what its calls
do, and the second chances it gets.

The model chooses on every turn (tool choice auto): it may think aloud (and, on
Anthropic's strong tier with `[model] thinking`, think at length) before its
calls. A turn must be a tool call only where an answer is due: the turn after a
reminder (some tool), and the one last turn past `model.max_turns` (the final
answer, or giving up). Those turns go without extended thinking, which cannot
be combined with a forced call.

A turn's calls run in the order given, the final one (`submit`, or
`cannot_complete` for an agent that may give up) last: in `[edit_file, submit]`
the edit happens, then the answer is taken. If a call that ran in the same turn
failed, the `submit` is refused with a reason naming it, and the model goes on.

Ordinary failures go back to the model once each (events `agent.soft_failure`
through the recorder's `note`); a second gives up (`ModelGaveUp`, never a HALT):
a turn without a tool call is answered with a reminder. Schema slips go back
once per kind and run, and a repeat is structural (HALT with the record): an
answer that breaks its contract (ContractViolation; the error names the JSON
path and rule) and arguments that are not JSON, to any tool (ModelStopped).

Every agent's conversation stays inside its window (`soda.agent.limits`): tool
results are clipped, and once the estimated conversation passes its budget the
older tool results become one-line summaries, the latest KEEP_WHOLE kept whole
(event `agent.condensed`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Protocol

from soda.agent.condense import condense, estimated_tokens
from soda.agent.definition import GIVE_UP, SUBMIT, Agent, OutputT, T
from soda.agent.limits import Limits
from soda.contracts import Contract, validate
from soda.errors import ContractViolation, ModelGaveUp, ModelStopped, StructuralError, Violation
from soda.llm.base import Message, ModelRequest, ModelResponse, ToolCall, ToolResult, ToolSpec
from soda.tools.toolbox import Suspended, clip_result

KEEP_WHOLE = 3
"""Messages of tool results, the latest ones, that condensing for the session
budget leaves whole: what the model is working on right now."""
NO_TOOL_CALL = (
    "You ended your turn without calling a tool. Think aloud if it helps, but end "
    "every turn with a tool call: keep working with your tools, or call `submit` "
    "with your final answer."
)
SECOND_FINAL_CALL = "Not taken: only the first final call of a turn counts."
NOT_ON_LAST_TURN = "Not run: this was your last turn, in which only your answer counts."


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
class Conversation(Generic[T]):
    """One agent run's moving parts: what is sent on the next turn."""

    agent: Agent[T]
    model: str
    tools: list[ToolSpec]
    messages: list[Message]
    limits: Limits
    max_tokens: int
    turn: int = 0
    """The turn being asked (for an Answer given up on the way)."""
    counted: int = 0
    """Tokens the model counted in its last exchange (prompt and answer)."""
    slipped: set[str] = field(default_factory=set)
    """Kinds of schema slip already handed back in this run: a repeat is structural."""


Ask = Callable[[Conversation[Any], int, tuple[str, ...]], ModelResponse]
"""One turn's model call: (conversation, turn, tools the turn must call)."""


class Turns(Generic[T]):
    """The turns of one agent run, from the first to its answer."""

    def __init__(
        self,
        conversation: Conversation[T],
        toolbox: Toolset | None,
        ask: Ask,
        record: Recorder,
        max_turns: int,
    ) -> None:
        self.conversation = conversation
        self.toolbox = toolbox
        self.ask = ask
        self.record = record
        self.max_turns = max_turns
        agent = conversation.agent
        self.finals = (SUBMIT, GIVE_UP) if agent.can_give_up else (SUBMIT,)

    @property
    def agent(self) -> Agent[T]:
        return self.conversation.agent

    def run(self) -> Answer[T]:
        """Turn after turn until the answer; then one last turn past the limit."""
        messages = self.conversation.messages
        reminded = False
        for turn in range(1, self.max_turns + 1):
            every_tool = tuple(tool.name for tool in self.conversation.tools)
            response = self.ask(self.conversation, turn, every_tool if reminded else ())
            if not response.tool_calls:
                if reminded:
                    raise ModelGaveUp(
                        "no_tool_call",
                        f"no tool call: agent {self.agent.name} ended turn {turn} without "
                        f"calling a tool, again after being told to (stop_reason "
                        f"{response.stop_reason})",
                        raw=response.raw,
                    )
                reminded = True
                self.record.note(self.agent.name, "no_tool_call", {"turn": turn})
                if response.text or response.thinking:
                    messages.append(_said(response))
                tell(messages, NO_TOOL_CALL)
                continue
            reminded = False
            messages.append(_said(response))
            answer = self.take(response, turn)
            if answer is not None:
                return answer
            self.keep_within_budget()
        return self.last_turn()

    def take(self, response: ModelResponse, turn: int, last: bool = False) -> Answer[T] | None:
        """Run the turn's calls, the final one last; the answer when it was taken,
        else None with every call's result added to the conversation. On the last
        turn only the final call counts."""
        calls = response.tool_calls
        final = next((call for call in calls if call.name in self.finals), None)
        results: dict[str, ToolResult] = {}
        failed: list[str] = []
        for call in calls:
            if call is final:
                continue
            if call.name in self.finals:
                results[call.id] = ToolResult(call.id, SECOND_FINAL_CALL, is_error=True)
            elif last:
                results[call.id] = ToolResult(call.id, NOT_ON_LAST_TURN, is_error=True)
            else:
                results[call.id] = self.work(call, turn, response, list(results.values()))
                if results[call.id].is_error:
                    failed.append(call.name)
        if final is not None:
            answer, refused = self.conclude(final, failed, turn, response)
            if answer is not None:
                return answer
            results[final.id] = refused
        ordered = [results[call.id] for call in calls if call.id in results]
        self.conversation.messages.append(Message(role="user", tool_results=ordered))
        return None

    def work(
        self, call: ToolCall, turn: int, response: ModelResponse, earlier: list[ToolResult]
    ) -> ToolResult:
        """One working call's result; a call that suspends the run (`ask_human`)
        hands it the conversation and the turn's earlier results first."""
        if call.unreadable is not None:
            return self.unreadable(call, turn, response)
        if self.toolbox is None:
            return ToolResult(call.id, f"unknown tool {call.name!r}", is_error=True)
        try:
            outcome = self.toolbox.call(call.name, call.input)
        except Suspended as pause:
            pause.keep(list(self.conversation.messages), earlier, call.id)
            raise
        content = clip_result(outcome.content, self.conversation.limits.tool_result_chars)
        return ToolResult(call.id, content, is_error=outcome.is_error)

    def conclude(
        self, final: ToolCall, failed: list[str], turn: int, response: ModelResponse
    ) -> tuple[Answer[T] | None, ToolResult]:
        """The answer a final call gives, or the result that refuses it."""
        if final.unreadable is not None:
            return None, self.unreadable(final, turn, response)
        if final.name == GIVE_UP:
            reason = str(final.input.get("reason", ""))
            return Answer(output=None, gave_up=reason, turns=turn), _taken(final)
        if failed:
            names = ", ".join(dict.fromkeys(failed))
            self.record.note(self.agent.name, "submit_refused", {"turn": turn, "failed": failed})
            said = (
                f"Your `submit` was not taken: {names} failed in the same turn (see its "
                "result). Deal with that first, then call `submit` again."
            )
            return None, ToolResult(final.id, said, is_error=True)
        result = validate(self.agent.contract, final.input, self.agent.output_type)
        if not isinstance(result, Violation):
            return Answer(output=result, gave_up=None, turns=turn), _taken(final)
        violation = result
        error = ContractViolation(violation, raw=final.input, agent=self.agent.name)
        said = (
            f"Your answer was refused: at {violation.path} it breaks the rule "
            f"{violation.rule!r} of the {violation.contract} contract: {violation.message}. "
            "Call `submit` again with the whole answer, corrected; a second answer that "
            "breaks the contract ends the run."
        )
        detail = {"path": violation.path, "rule": violation.rule}
        return None, self.slip("contract_violation", final, turn, said, error, detail)

    def unreadable(self, call: ToolCall, turn: int, response: ModelResponse) -> ToolResult:
        """Arguments that are not JSON: handed back once, structural on a repeat."""
        problem = call.unreadable or "unreadable"
        error = ModelStopped(
            "invalid_json",
            f"agent {self.agent.name}: the arguments to {call.name} are {problem}, again "
            "after the model was told",
            raw=response.raw,
        )
        said = (
            f"Your arguments to {call.name} could not be read: they are {problem}. Call "
            "it again with one JSON object that matches its schema."
        )
        detail = {"problem": problem}
        return self.slip("invalid_arguments", call, turn, said, error, detail)

    def slip(
        self,
        kind: str,
        call: ToolCall,
        turn: int,
        said: str,
        error: StructuralError,
        detail: dict[str, Any],
    ) -> ToolResult:
        """A schema slip's error result, the first time in this run; `error` after."""
        if kind in self.conversation.slipped:
            raise error
        self.conversation.slipped.add(kind)
        data = {"turn": turn, "tool": call.name, **detail}
        self.record.note(self.agent.name, kind, data)
        return ToolResult(call.id, said, is_error=True)

    def last_turn(self) -> Answer[T]:
        """Out of turns: one more, in which only the answer (or giving up) counts;
        an answer that slipped gets its one second chance there too."""
        max_turns = self.max_turns
        self.record.note(self.agent.name, "turn_limit", {"turn": max_turns})
        tell(self.conversation.messages, last_turn_prompt(self.agent, max_turns))
        for turn in (max_turns + 1, max_turns + 2):
            response = self.ask(self.conversation, turn, self.finals)
            if not any(call.name in self.finals for call in response.tool_calls):
                break
            self.conversation.messages.append(_said(response))
            answer = self.take(response, turn, last=True)
            if answer is not None:
                if answer.gave_up is not None:
                    why = f"turn limit ({max_turns} turns): {answer.gave_up}"
                    answer = replace(answer, gave_up=why)
                return answer
        raise ModelGaveUp(
            "turn_limit",
            f"turn limit: agent {self.agent.name} did not submit within {max_turns} turns "
            "(model.max_turns), nor on one last turn that asked only for its answer",
            raw=response.raw,
        )

    def keep_within_budget(self) -> None:
        """Past the session budget (see soda.agent.limits), older tool results
        become one-line summaries (the latest KEEP_WHOLE stay whole)."""
        conversation = self.conversation
        agent, messages = conversation.agent, conversation.messages
        budget = conversation.limits.session_tokens(conversation.tools)
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


def _said(response: ModelResponse) -> Message:
    """The model's turn, as the conversation keeps it (thinking included)."""
    return Message(
        role="assistant",
        text=response.text,
        tool_calls=response.tool_calls,
        thinking=response.thinking,
    )


def _taken(call: ToolCall) -> ToolResult:
    return ToolResult(call.id, "Taken.")


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


def tell(messages: list[Message], text: str) -> None:
    """Say `text` to the model after the last message: in the last user turn when
    there is one (some chat templates refuse two user turns in a row)."""
    last = messages[-1]
    if last.role == "user":
        messages[-1] = replace(last, text=f"{last.text}\n\n{text}" if last.text else text)
    else:
        messages.append(Message(role="user", text=text))
