"""The prompt cache as the Messages API counts it, simulated for tests/fakeapi.py.

A request is read as blocks in the API's order (tools, system, messages); a
block carrying `cache_control` writes the prefix up to it to the cache (when it
is at least the model's `min_cacheable` long), and the longest prefix written by an
earlier request that this one repeats, ending at most LOOKBACK_BLOCKS before
one of its markers, is read back. Tokens are estimated as characters / 4.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

MIN_CACHEABLE_TOKENS = 1024
"""The shortest prefix the API caches (Sonnet 4.x; see `min_cacheable`)."""
LONGER_MINIMUM = (("haiku-4-5", 4096), ("opus-4-5", 4096), ("opus-4-6", 4096), ("opus-4-7", 4096))
"""Models whose shortest cacheable prefix is longer, as Anthropic documents them
(Haiku 4.5 and Opus 4.5 on: 4,096 tokens)."""
LOOKBACK_BLOCKS = 20
"""How far before a marker the API looks for an earlier cache entry."""
CHARS_PER_TOKEN = 4


def prompt_blocks(body: dict[str, Any]) -> list[tuple[str, bool]]:
    """The request as the cache sees it: (canonical text, carries a marker) per
    block, in the API's order (tools, system, then each message's blocks). The
    model and tool choice lead the first block: another one is another cache."""

    def plain(block: dict[str, Any]) -> tuple[str, bool]:
        rest = {k: v for k, v in block.items() if k != "cache_control"}
        return json.dumps(rest, sort_keys=True), "cache_control" in block

    head = json.dumps([body.get("model"), body.get("tool_choice"), body.get("output_config")])
    blocks = [(head, False)]
    blocks += [plain(tool) for tool in body.get("tools") or []]
    system = body.get("system") or []
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    blocks += [plain(block) for block in system]
    for message in body.get("messages") or []:
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for block in content:
            text, marked = plain(block)
            blocks.append((message["role"] + text, marked))
    return blocks


def min_cacheable(model: str) -> int:
    """The shortest prefix the API caches for `model`."""
    return next((n for name, n in LONGER_MINIMUM if name in model), MIN_CACHEABLE_TOKENS)


def cache_usage(body: dict[str, Any], cache: set[str]) -> dict[str, int]:
    """input, cache-write and cache-read tokens of `body`, updating `cache` (the
    prefixes earlier requests wrote)."""
    hashes, ends, total, digest = [], [], 0, hashlib.sha256()
    blocks = prompt_blocks(body)
    for text, _ in blocks:
        digest.update(text.encode())
        hashes.append(digest.copy().hexdigest())
        total += len(text)
        ends.append(total // CHARS_PER_TOKEN)
    marks = [i for i, (_, marked) in enumerate(blocks) if marked]
    shortest = min_cacheable(str(body.get("model")))
    hits = [
        i
        for i in range(len(blocks))
        if hashes[i] in cache and any(0 <= m - i <= LOOKBACK_BLOCKS for m in marks)
    ]
    read = ends[max(hits)] if hits else 0
    written = read
    for m in marks:
        if ends[m] >= shortest and ends[m] > read:
            cache.add(hashes[m])
            written = max(written, ends[m])
    return {
        "input_tokens": ends[-1] - written,
        "cache_creation_input_tokens": written - read,
        "cache_read_input_tokens": read,
    }
