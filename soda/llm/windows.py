"""How many tokens a model can read and write in one request: its context window.

A model's window bounds everything soda sends it and the answer it asks for;
`soda.agent.limits` sizes each agent's answer budget, tool results and
condensing from it. The window comes from `[model] context_window` (and
`context_window_fast`) when a person set it, else from a small table of known
models, else from DEFAULT_CONTEXT_WINDOW: a guess small enough that an unknown
local model is not overrun (Ollama cuts a long prompt silently instead of
refusing it, so guessing high is the costly mistake).

The table describes the models, not the servers: a local server may give a
model less than its native window (Ollama's num_ctx, vLLM's --max-model-len,
llama.cpp's --ctx-size), and then the setting must say what the server gives.

Servers that refuse a request for its length word it in many ways;
`context_refusal` tells a prompt past the window (PromptTooLong) from a prompt
that fits with no room left for max_tokens (MaxTokensTooLarge: vLLM counts
max_tokens inside the window).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from soda.config import ModelConfig
from soda.errors import MaxTokensTooLarge, PromptTooLong

DEFAULT_CONTEXT_WINDOW = 8192
"""Tokens assumed for a model soda does not know: what the smallest useful local
models have (llama3), and more than Ollama's default num_ctx of old."""

KNOWN_WINDOWS: tuple[tuple[re.Pattern[str], int], ...] = tuple(
    (re.compile(pattern), tokens)
    for pattern, tokens in (
        (r"claude", 200_000),
        (r"gpt-?4o", 128_000),
        (r"gpt-?4\.1", 1_047_576),
        (r"gpt-?5", 400_000),
        (r"^o[134]\b", 200_000),
        (r"qwen-?2\.5-?coder", 32_768),
        (r"qwen-?2\.5", 32_768),
        (r"llama-?3\.[123]", 131_072),
        (r"llama-?3", 8192),
        (r"^scripted$", 200_000),
    )
)
"""Native context windows by model id (lower-cased, without an org/ prefix such
as `Qwen/`), first match wins. `scripted` is soda's offline replay (the demo),
which plays a Claude model's part and has no window of its own."""

Tier = Literal["strong", "fast"]


@dataclass(frozen=True)
class Window:
    """A model's context window and where that number came from."""

    tokens: int
    source: str
    """For messages: the setting that gave it, or why it was assumed."""
    setting: str
    """The soda.toml key a person sets to change it."""


def known_window(model: str) -> int | None:
    """The table's window for a model id, or None when soda does not know it."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    return next((tokens for pattern, tokens in KNOWN_WINDOWS if pattern.search(name)), None)


def context_window(config: ModelConfig, tier: Tier) -> Window:
    """The window of the tier's model: the setting, the table, or the default."""
    model = config.strong if tier == "strong" else config.fast
    setting = "model.context_window" if tier == "strong" else "model.context_window_fast"
    given = config.context_window if tier == "strong" else config.context_window_fast
    if given is None and tier == "fast" and config.fast == config.strong:
        # One model serves both tiers: one setting says its window.
        given, setting = config.context_window, "model.context_window"
    if given is not None:
        return Window(given, setting, setting)
    known = known_window(model)
    if known is not None:
        return Window(known, f"soda's table of known models ({model})", setting)
    return Window(
        DEFAULT_CONTEXT_WINDOW,
        f"soda's default for a model it does not know ({model})",
        setting,
    )


CONTEXT_EXCEEDED = re.compile(
    r"context[ _]length|maximum context|context (size|window)|prompt is too long|too many tokens",
    re.IGNORECASE,
)
"""How OpenAI, vLLM, llama.cpp and gateways word a prompt past the context window."""
REQUESTED = re.compile(
    r"maximum context length is (\d+) tokens.*?(\d+) in the messages, (\d+) in the completion",
    re.IGNORECASE | re.DOTALL,
)
"""vLLM (and OpenAI of old): the window, then what the prompt and max_tokens took."""
INPUT_TOKENS = re.compile(
    r"maximum context length is (\d+) tokens and your request has (\d+) input tokens",
    re.IGNORECASE,
)
"""Newer vLLM, for a max_tokens too large for the room the prompt leaves."""
AT_MOST = re.compile(r"supports at most (\d+) completion tokens", re.IGNORECASE)
"""OpenAI, for a max_tokens above the model's output limit."""
MAX_TOKENS_REFUSED = re.compile(
    r"max_(completion_)?tokens\W.{0,60}(too large|too high|does not fit|exceed)",
    re.IGNORECASE | re.DOTALL,
)
"""Any other wording that blames max_tokens rather than the prompt."""


def context_refusal(status: int, message: str) -> Exception | None:
    """A refusal for length, told apart: the prompt itself past the window
    (PromptTooLong), or a prompt that fits with no room left for max_tokens
    (MaxTokensTooLarge, with the room when the server says); None otherwise."""
    said = f"(HTTP {status}): {message}"
    too_long = PromptTooLong(f"the model server refused a prompt too long {said}")

    def no_room(room: int | None) -> MaxTokensTooLarge:
        return MaxTokensTooLarge(f"the model server found no room for max_tokens {said}", room)

    for pattern in (REQUESTED, INPUT_TOKENS):
        found = pattern.search(message)
        if found is not None:
            window, prompt = int(found.group(1)), int(found.group(2))
            return no_room(window - prompt) if prompt < window else too_long
    at_most = AT_MOST.search(message)
    if at_most is not None:
        return no_room(int(at_most.group(1)))
    if MAX_TOKENS_REFUSED.search(message):
        return no_room(None)
    if CONTEXT_EXCEEDED.search(message):
        return too_long
    return None
