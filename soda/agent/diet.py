"""The tools an agent is offered on a small context window: shorter, and fewer.

Tool names, descriptions and schemas are sent with every request, and on a
small window they are most of the first one (58-67% at 8,192 tokens). While
they take at most 1/TOOL_SHARE of the window, every tool is offered whole (a
200k window always is). Past that, each tool is offered in its short form: its
description's first sentence, each parameter's description its first sentence,
the schema's own description, title and examples left out (its types, required
fields and enums unchanged, so what the model may send is the same). If the
short forms still pass the share, the tools an agent can do without are left
out, least needed first (`SPARE`): git's history and diffs, then the repository
map; reading, searching, writing, running and the terminal tools always stay.

The choice depends only on the agent's tools and its window, never on the
inputs: the tools lead every request, and a prefix that changed from one
iteration to the next would be a prefix the prompt cache cannot serve.
A tool left out is still answered if the model calls it anyway (the toolbox
keeps it); it is only not described.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from soda.agent.condense import CHARS_PER_TOKEN
from soda.llm.base import ToolSpec

TOOL_SHARE = 4
"""Tools are offered whole while they take at most 1/TOOL_SHARE of the window."""
SPARE = ("git_diff", "git_show", "git_log", "repo_map")
"""Tools left out, in this order, when their short forms still pass the share."""
DROPPED_KEYS = frozenset({"title", "examples", "$schema", "$id"})
"""Schema keys the short form leaves out (they say nothing about what is valid)."""
NAMED = frozenset({"properties", "$defs", "definitions", "patternProperties"})
"""Schema keys whose value maps names to schemas."""
FIRST_SENTENCE = re.compile(r"(.+?(?<!\be\.g)(?<!\bi\.e)[.!?])(?=\s|$)", re.DOTALL)
"""A sentence's end: a full stop (not that of "e.g." or "i.e."), followed by a
space or the end."""


def offered_tools(tools: list[ToolSpec], window_tokens: int) -> list[ToolSpec]:
    """The tools as offered on a window of `window_tokens` (see the module)."""
    room = window_tokens // TOOL_SHARE
    if tool_tokens(tools) <= room:
        return tools
    short = [short_form(tool) for tool in tools]
    for name in SPARE:
        if tool_tokens(short) <= room:
            break
        short = [tool for tool in short if tool.name != name]
    return short


def tool_tokens(tools: list[ToolSpec]) -> int:
    """Estimated tokens of the tools' names, descriptions and schemas."""
    chars = sum(
        len(tool.name) + len(tool.description) + len(json.dumps(tool.input_schema))
        for tool in tools
    )
    return chars // CHARS_PER_TOKEN


def short_form(tool: ToolSpec) -> ToolSpec:
    """The tool with its description and its parameters' cut to a first sentence."""
    schema = {k: v for k, v in tool.input_schema.items() if k != "description"}
    return replace(tool, description=first_sentence(tool.description), input_schema=_short(schema))


def first_sentence(text: str) -> str:
    """The text's first sentence, on one line (all of it when it has one)."""
    text = " ".join(text.split())
    found = FIRST_SENTENCE.match(text)
    return found.group(1) if found else text


def _short(schema: Any) -> Any:
    """A JSON schema with its descriptions cut and DROPPED_KEYS left out, walked
    by its structure (a property may be named `title` or `description`)."""
    if isinstance(schema, list):
        return [_short(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    short: dict[str, Any] = {}
    for key, value in schema.items():
        if key in DROPPED_KEYS:
            continue
        if key == "description" and isinstance(value, str):
            short[key] = first_sentence(value)
        elif key in NAMED and isinstance(value, dict):
            short[key] = {name: _short(item) for name, item in value.items()}
        else:
            short[key] = _short(value)
    return short
