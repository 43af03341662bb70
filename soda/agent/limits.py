"""What an agent may spend of its model's context window, and whether a request fits.

Every agent's limits come from its tier's context window (`soda.llm.windows`:
`[model] context_window`, the table of known models, or a conservative default),
with the settings as upper bounds:

- the answer budget (`max_tokens`): a third of the window, at most
  `[model] max_tokens`; a strong-tier agent asks for `[model] thinking` tokens
  on top when thinking is on;
- one tool result: an eighth of the window (4 characters a token), at most
  `[context] tool_result_chars`;
- the conversation: condensed (older tool results become one-line notes) once
  the system prompt and the messages pass three quarters of what the window
  leaves after the tools' schemas and the answer budget (estimates are rough;
  the margin keeps the next request inside the window), and for the executor at
  `[context] executor_session_tokens` at most.

On a small window the tools are offered in short forms, and fewer of them
(`soda.agent.diet`: while whole they would take more than a quarter of it).

A window of 200k tokens (Claude) leaves every default as it was; 32k and 8k
windows shrink them in proportion. A first request that cannot fit at all is a
person's problem, not the model's (`ContextTooSmall`, naming the setting).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from soda.agent.condense import CHARS_PER_TOKEN, history_size
from soda.agent.diet import offered_tools, tool_tokens
from soda.config import Config
from soda.errors import ContextTooSmall
from soda.llm.base import Message, ToolSpec
from soda.llm.windows import Window, context_window

ANSWER_SHARE = 3
"""The answer budget is at most 1/ANSWER_SHARE of the window."""
RESULT_SHARE = 8
"""One tool result is at most 1/RESULT_SHARE of the window."""
SESSION_SHARE = 0.75
"""Of the room the tools and the answer leave, the share a conversation may fill
before it is condensed."""
MIN_ANSWER_TOKENS = 256
"""Below this, an answer (a tool call with its arguments) cannot be written: a
server that leaves less has no room for the prompt either."""
MIN_RESULT_CHARS = 1000


@dataclass(frozen=True)
class Limits:
    """One agent's share of its model's context window."""

    window: Window
    max_tokens: int
    """Tokens asked for the answer."""
    thinking: int
    """Extended-thinking tokens asked for on top (0: off)."""
    tool_result_chars: int
    executor_cap: int | None
    """[context] executor_session_tokens for the executor; None for other agents."""

    @property
    def answer_tokens(self) -> int:
        """What the answer may take of the window, thinking included."""
        return self.max_tokens + self.thinking

    def offered(self, tools: list[ToolSpec]) -> list[ToolSpec]:
        """The tools as this window offers them: whole, or short and fewer."""
        return offered_tools(tools, self.window.tokens)

    def session_tokens(self, tools: list[ToolSpec]) -> int:
        """The condensing budget, in estimated tokens of system prompt and messages."""
        room = self.window.tokens - self.answer_tokens - tool_tokens(tools)
        budget = max(0, int(room * SESSION_SHARE))
        return budget if self.executor_cap is None else min(budget, self.executor_cap)

    def overflow(self, system: str, tools: list[ToolSpec], messages: list[Message]) -> int:
        """Estimated tokens by which a request with this answer budget passes the
        window (0 or less: it fits)."""
        return request_tokens(system, tools, messages) + self.answer_tokens - self.window.tokens

    def too_small(self, agent: str, problem: str) -> ContextTooSmall:
        """The user error for a first request that cannot fit, naming the setting."""
        window = self.window
        thinking = f" and {self.thinking:,} of thinking (model.thinking)" if self.thinking else ""
        return ContextTooSmall(
            f"agent {agent}'s first request {problem}, with {self.max_tokens:,} tokens "
            f"for its answer{thinking}: it does not fit the model's context window of "
            f"{window.tokens:,} tokens (from {window.source}). Give the model a larger "
            "window on its server (Ollama: num_ctx; vLLM: --max-model-len; llama.cpp: "
            f"--ctx-size) and set {window.setting} to it"
        )


def limits_for(config: Config, tier: Literal["strong", "fast"], executor: bool) -> Limits:
    """The limits of an agent of `tier` (the executor has a session cap of its own)."""
    window = context_window(config.model, tier)
    max_tokens = min(config.model.max_tokens, max(MIN_ANSWER_TOKENS, window.tokens // ANSWER_SHARE))
    by_window = window.tokens * CHARS_PER_TOKEN // RESULT_SHARE
    return Limits(
        window=window,
        max_tokens=max_tokens,
        thinking=config.model.thinking if tier == "strong" else 0,
        tool_result_chars=min(config.context.tool_result_chars, max(MIN_RESULT_CHARS, by_window)),
        executor_cap=config.context.executor_session_tokens if executor else None,
    )


def request_tokens(system: str, tools: list[ToolSpec], messages: list[Message]) -> int:
    """Estimated tokens of a whole request's prompt: system, tools and messages."""
    return (len(system) + history_size(messages)) // CHARS_PER_TOKEN + tool_tokens(tools)
