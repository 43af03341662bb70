"""Running an agent: render its prompt, drive the model's tool loop, validate the answer.

An agent is data (see `agents/*.md`): a name, a system prompt, an output
contract, a tool set and a model tier. `AgentRunner.run` offers the agent's
tools plus the terminal `submit` tool (whose input schema is the contract), and
hands the turns to `soda.agent.turns` (tool choice, the order of a turn's calls,
the second chances for schema slips, condensing) until the model submits an
answer that passes the contract. Every model call is handed to a
`CallRecorder`, which stores it in `agent_calls` and enforces the budget.

The model call itself (`_ask`) has the second chances of a request (events
`agent.soft_failure`); a second failure gives up (`ModelGaveUp`, never a HALT;
an executor's task ends as given up instead):

- cut off at max_tokens with no whole tool call: the call is made again with the
  limit doubled (up to the model's maximum and the window's room), and the
  raised limit holds for the rest of the run;
- a prompt past the context window: older tool results become one-line notes
  (what was called, how long the result was) and the call is made again;
- a prompt that fits but leaves no room for max_tokens (vLLM): max_tokens is
  lowered to the room the server reports and the call is made again.

A provider's rate limit that outlasts its retry budget (`ProviderLimit`) is no
failure: the runner waits until it resets, with no model call (soda.agent.quota,
on its `clock`, ending at a stop), and makes the same call again.

What each agent may spend comes from its model's context window
(`soda.agent.limits`): the answer budget, the tool-result size, the
condensing budget, and on a small window the tools' short forms
(`soda.agent.diet`). A first request that cannot fit the window, by soda's
estimate before it is sent or by the server's refusal, is a person's to fix
(`ContextTooSmall`, exit 2, naming model.context_window), never a failure to
retry. Each run is framed by `agent.start` and `agent.end` events.

Typed: an `Agent[Verification]` (see `load_agent`) runs to an
`Answer[Verification]`, its output validated into the agent's own model.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

from soda.agent.condense import condense, history_size
from soda.agent.definition import SUBMIT, Agent, T, first_message, terminal_tools
from soda.agent.limits import MIN_ANSWER_TOKENS, Limits, limits_for, request_tokens
from soda.agent.quota import wait_out
from soda.agent.turns import (
    KEEP_WHOLE,
    Answer,
    Conversation,
    Recorder,
    Toolset,
    Turns,
    last_turn_prompt,
)
from soda.config import Config, LiveConfig
from soda.errors import Interrupted, MaxTokensTooLarge, ModelGaveUp, PromptTooLong, ProviderLimit
from soda.llm.base import (
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    raised_limit,
    safe_response,
)
from soda.system.clock import SYSTEM_CLOCK, Clock
from soda.system.jail import Jail
from soda.tools.servers import Beside, open_servers

__all__ = ["KEEP_WHOLE", "AgentRunner", "Answer", "Recorder", "Toolset", "last_turn_prompt"]


class AgentRunner:
    def __init__(self, model: Model, config: Config | LiveConfig, record: Recorder) -> None:
        self.model = model
        self.live = LiveConfig.of(config)
        self.record = record
        self.should_stop: Callable[[], bool] = lambda: False
        """Checked before every model call: the safe point where a signal takes effect."""
        self.iteration: int | None = None
        """The iteration its requests are made for (None outside one)."""
        self.clock: Clock = SYSTEM_CLOCK
        """What a wait for the provider's rate limit runs on (the session's)."""
        self.jail: Callable[[], Jail] | None = None
        """Where an agent's MCP servers run (the session's jail); None: nowhere,
        so no agent is offered a server's tools."""

    @property
    def config(self) -> Config:
        """The current config (a reload swaps it in `live`)."""
        return self.live.current

    def recording_to(self, record: Recorder, iteration: int | None = None) -> AgentRunner:
        """The same runner, recording its calls and events with `record` (an
        iteration's recorder, or a task's locked view of it); `iteration`: the
        iteration it asks for from now on (None: the same as before)."""
        runner = copy.copy(self)
        runner.record = record
        if iteration is not None:
            runner.iteration = iteration
        return runner

    def limits(self, agent: Agent[Any]) -> Limits:
        """What `agent` may spend of its model's context window."""
        return limits_for(self.config, agent.tier, executor=agent.tools == "worktree")

    def overflow(self, agent: Agent[Any], inputs: dict[str, Any], toolbox: Toolset | None) -> int:
        """Estimated tokens by which the agent's first request with these inputs
        would pass its model's window (0 or less: it fits)."""
        limits = self.limits(agent)
        tools = limits.offered((toolbox.specs() if toolbox else []) + terminal_tools(agent))
        return limits.overflow(agent.system, tools, [first_message(agent, inputs)])

    def run(
        self,
        agent: Agent[T],
        inputs: dict[str, Any],
        toolbox: Toolset | None,
        resume: list[Message] | None = None,
    ) -> Answer[T]:
        """The agent's validated answer. Raises ContractViolation when the answer
        breaks the contract twice, ModelGaveUp when the model failed twice in an
        ordinary way (an agent that may give up, the executor, gets an Answer that
        says so instead), and ContextTooSmall when the first request cannot fit.
        The MCP servers `[mcp.servers]` gives the agent run for this run, in the
        jail, in the toolbox's directory; their tools are offered beside its own."""
        with self._servers(agent, toolbox) as servers:
            return self._run(
                agent, inputs, Beside(toolbox, servers) if servers else toolbox, resume
            )

    def _servers(self, agent: Agent[Any], toolbox: Toolset | None) -> Any:
        """The agent's MCP servers, started (soda.tools.servers); None when it has none."""
        root: Path | None = getattr(toolbox, "root", None)
        if self.jail is None or root is None or not self.config.mcp.for_agent(agent.name):
            return contextlib.nullcontext(None)
        jail = self.jail()
        # A checking agent's servers see ORIENT's checkout through an overlay when
        # the jail can lay one: their writes vanish, the checkout stays clean.
        sealed = agent.tools != "worktree" and jail.can_seal(root.parent)
        return open_servers(self.config, jail, agent.name, root, self.record.event, sealed)

    def _run(
        self,
        agent: Agent[T],
        inputs: dict[str, Any],
        toolbox: Toolset | None,
        resume: list[Message] | None,
    ) -> Answer[T]:
        limits = self.limits(agent)
        conversation = Conversation(
            agent=agent,
            model=self.config.model.strong if agent.tier == "strong" else self.config.model.fast,
            tools=limits.offered((toolbox.specs() if toolbox else []) + terminal_tools(agent)),
            # A run suspended by a tool (`Suspended`) goes on from its conversation.
            messages=list(resume) if resume else [first_message(agent, inputs)],
            limits=limits,
            max_tokens=limits.max_tokens,
        )
        if resume is None:
            over = limits.overflow(agent.system, conversation.tools, conversation.messages)
            if over > 0:
                prompt = limits.window.tokens + over - limits.answer_tokens
                raise limits.too_small(agent.name, f"is about {prompt:,} tokens long")
        self.record.event(
            "agent.start", {"agent": agent.name, "tier": agent.tier, "model": conversation.model}
        )
        outcome = "error"
        try:
            turns = Turns(
                conversation, toolbox, self._ask, self.record, self.config.model.max_turns
            )
            answer = turns.run()
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

    def _ask(
        self, conversation: Conversation[Any], turn: int, must_call: tuple[str, ...] = ()
    ) -> ModelResponse:
        """One turn's model call, recorded, with its second chances: a condensed
        history for a prompt too long, a lower limit for one that leaves no room
        for max_tokens, a higher limit for an answer cut off at max_tokens."""
        agent, limits = conversation.agent, conversation.limits
        condensed = raised = lowered = False
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
                thinking=0 if must_call else limits.thinking,
                iteration=self.iteration,
                on_event=self.record.event,
            )
            try:
                response = self.model.complete(request)
            except MaxTokensTooLarge as exc:
                room = (exc.room if exc.room is not None else request.max_tokens // 2) - (
                    request.thinking
                )
                if lowered or room < MIN_ANSWER_TOKENS:
                    self._shorten(conversation, turn, exc, condensed)
                    condensed = True
                    continue
                self.record.note(
                    agent.name,
                    "max_tokens_lowered",
                    {"turn": turn, "max_tokens": conversation.max_tokens, "lowered_to": room},
                )
                conversation.max_tokens = room
                lowered = True
                continue
            except PromptTooLong as exc:
                self._shorten(conversation, turn, exc, condensed)
                condensed = True
                continue
            except ProviderLimit as exc:  # no call until it resets, then the same turn
                wait_out(
                    exc.seconds,
                    str(exc),
                    agent.name,
                    self.clock,
                    self.should_stop,
                    self.record.event,
                )
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
            higher = None if raised else self._higher(conversation)
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

    def _shorten(
        self,
        conversation: Conversation[Any],
        turn: int,
        exc: PromptTooLong | MaxTokensTooLarge,
        condensed: bool,
    ) -> None:
        """A prompt the server refused as too long made shorter, once: its older
        tool results condensed. A first request has none: that is ContextTooSmall
        (a person's to fix); a conversation already condensed gives up."""
        agent, messages = conversation.agent, conversation.messages
        if not any(message.tool_results for message in messages):
            raise conversation.limits.too_small(
                agent.name, f"was refused by the model server as too long ({exc})"
            ) from exc
        shorter = None if condensed else condense(messages, keep=1)
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
                "characters_before": history_size(messages),
                "characters_after": history_size(shorter[0]),
            },
        )
        messages[:] = shorter[0]

    def _higher(self, conversation: Conversation[Any]) -> int | None:
        """A raised max_tokens for an answer cut off: doubled, within the model's
        maximum and the room the window leaves; None when there is no room."""
        higher = raised_limit(conversation.model, conversation.max_tokens)
        if higher is None:
            return None
        limits = conversation.limits
        prompt = request_tokens(
            conversation.agent.system, conversation.tools, conversation.messages
        )
        room = limits.window.tokens - limits.thinking - prompt
        return min(higher, room) if room > conversation.max_tokens else None
