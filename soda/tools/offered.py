"""What soda offers of an MCP server's tool, and what it keeps of a result.

A server's tool list is untrusted input, like a file in the repository: its
names, descriptions and schemas are the server's words. Each tool is offered
under soda's own name for it (`mcp__SERVER__TOOL`, only letters, digits, `_`
and `-`, at most 64 characters), its description cut to `mcp_filter.DESCRIPTION_CHARS`
and framed as the server's text, which grants nothing: what an agent may do is
the tools soda offers and the jail the server runs in, never what a description
says. Its input schema is kept to the keywords strict tool use accepts, every
property required (an optional one becomes nullable, and a null is left out of
the call again). A result is text, at most `RESULT_CHARS` of it; the agent's
runtime then clips it to the tool-result limit like any tool's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

PREFIX = "mcp__"
MAX_NAME = 64
"""The longest tool name model APIs accept."""
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
PROPERTY_CHARS = 200
"""Of a parameter's description, the characters kept."""
RESULT_CHARS = 1_000_000
"""Of a call's result, the characters kept before the runtime's clip (the largest
`[context] tool_result_chars`): a server's flood stops here."""
KEPT = frozenset(
    {"type", "properties", "required", "items", "enum", "const", "description", "anyOf"}
)
"""Schema keywords kept; the rest (ranges, lengths, formats, $refs) are dropped."""


def offered_name(server: str, tool: str) -> str | None:
    """soda's name for a server's tool, or None when it cannot be offered (a name
    with other characters, or too long together with the prefix)."""
    name = f"{PREFIX}{server}__{tool}"
    return name if TOOL_NAME.match(tool) and len(name) <= MAX_NAME else None


def strict_schema(schema: Any) -> dict[str, Any] | None:
    """The input schema offered for a tool's `schema`, or None when it is not a
    valid object schema."""
    if not isinstance(schema, Mapping) or schema.get("type", "object") != "object":
        return None
    try:
        Draft202012Validator.check_schema(dict(schema))
    except SchemaError:
        return None
    return _strict({**schema, "type": "object"})


def _strict(schema: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key not in KEPT:
            continue
        if key == "description":
            out[key] = str(value)[:PROPERTY_CHARS]
        elif key == "items" and isinstance(value, Mapping):
            out[key] = _strict(value)
        elif key == "anyOf" and isinstance(value, list):
            out[key] = [_strict(v) for v in value if isinstance(v, Mapping)]
        elif key not in ("properties", "required"):
            out[key] = value
    if out.get("type") == "object" or "properties" in schema:
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        required = set(schema.get("required") or [])
        out["properties"] = {
            str(name): _strict(sub) if name in required else _nullable(_strict(sub))
            for name, sub in properties.items()
            if isinstance(sub, Mapping)
        }
        out["required"] = list(out["properties"])
        out["additionalProperties"] = False
    return out


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


def sent(schema: Any, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments as the server expects them: a null given for one of its
    optional properties left out (the offered schema made it nullable)."""
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    required = set(schema.get("required") or []) if isinstance(schema, Mapping) else set()
    out: dict[str, Any] = {}
    for name, value in arguments.items():
        if value is None and name not in required:
            continue
        sub = properties.get(name) if isinstance(properties, Mapping) else None
        out[name] = sent(sub, value) if isinstance(value, Mapping) and sub else value
    return out


def result_text(content: list[Any], structured: Any) -> str:
    """A call's result as text: its text blocks, a line for any other block, and
    its structured content when it has no blocks; at most RESULT_CHARS."""
    parts: list[str] = []
    size = 0
    for block in content:
        kind = getattr(block, "type", "")
        if kind == "text":
            text = str(getattr(block, "text", ""))
        elif kind in ("image", "audio"):
            text = f"[{kind} ({getattr(block, 'mime_type', '?')}), not shown]"
        elif kind == "resource_link":
            text = f"[resource {getattr(block, 'uri', '')}]"
        elif kind == "resource":
            resource = getattr(block, "resource", None)
            text = str(getattr(resource, "text", f"[resource {getattr(resource, 'uri', '')}]"))
        else:
            text = f"[{kind or 'unknown'} content, not shown]"
        parts.append(text[: RESULT_CHARS - size + 1])
        size += len(parts[-1])
        if size > RESULT_CHARS:
            break
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False)[: RESULT_CHARS + 1])
    text = "\n".join(parts)
    return text[:RESULT_CHARS] if len(text) > RESULT_CHARS else text
