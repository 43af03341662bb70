"""Tools as data, and the toolbox that calls them without ever raising.

A `Tool` is a spec the model sees plus a handler. `Toolbox.call` validates the
model's arguments against the spec's JSON Schema and turns every failure (an
unknown tool, bad arguments, a `ToolError`, any other exception) into an error
outcome with a one-line message (followed by a ToolError's `detail`, when it has
one, on lines of its own): one bad tool call must not kill the agent.
`clip_result` bounds what any result shows the model (`[context]
tool_result_chars`; the runtime applies it). `Suspended` is the one exception a
tool may let through: the control flow of a call that waits for a person.

Every property of a tool's schema is required, as strict modes demand: an
optional argument is nullable, or has a default kept on the `Tool` and out of
the schema (strict modes refuse `default`), which adds no union-typed parameter
(Anthropic refuses a request with more than 16). Models not held to the schema
(Ollama, llama.cpp) often leave such arguments out, so `call` fills an absent
nullable one with null, and an absent or null defaulted one with its default,
before validating.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from soda.llm.base import Message, ToolResult, ToolSpec
from soda.tools.sandbox import ToolError

MAX_ERROR_CHARS = 500
MAX_ERROR_DETAIL_CHARS = 3000
"""Of a ToolError's detail, the lines shown after the one-line message."""


class Suspended(BaseException):
    """Raised by a tool whose call needs an answer from outside the run (a
    person's, for `ask_human`): the run stops, and before it does the runner hands
    `keep` the conversation so far, the results of the turn's earlier calls and
    the id of the waiting call, so that `run(..., resume=...)` can go on with the
    answer as that call's result. A BaseException: the toolbox turns every error
    into a tool result, and this is not an error."""

    def __init__(
        self, reason: str, keep: Callable[[list[Message], list[ToolResult], str], None]
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.keep = keep


@dataclass(frozen=True)
class Tool:
    spec: ToolSpec
    handler: Callable[[dict[str, Any]], str]
    defaults: Mapping[str, Any] = field(default_factory=dict)
    """Values for non-nullable properties the model leaves out (or sends as null)."""


@dataclass(frozen=True)
class ToolOutcome:
    """What goes back to the model as the tool result."""

    content: str
    is_error: bool = False


def object_schema(properties: dict[str, Any]) -> dict[str, Any]:
    """An input schema strict-mode model APIs accept: every property required (optional
    ones are nullable instead), nothing extra allowed, no range or length keywords."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def described(kind: str | list[str], text: str) -> dict[str, Any]:
    """A property schema of type `kind` (a name, or a list of names) with its
    description: every parameter the model sees says what it is for."""
    return {"type": kind, "description": text}


FILE_PATH = (
    "File path relative to the repository root, e.g. 'src/app.py' (absolute paths are refused)."
)
DIR_PATH = "Directory relative to the repository root; null means the whole repository."
SCOPE_PATH = "File or directory relative to the repository root; null means everything."


class Toolbox:
    """The tools one agent may call, by name."""

    def __init__(self, tools: Iterable[Tool], root: Path | None = None) -> None:
        self.root = root
        """The directory its tools are confined to (where an agent's MCP servers
        run: soda.tools.servers); None when it has none."""
        self.tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.spec.name in self.tools:
                raise ValueError(f"two tools are named {tool.spec.name!r}")
            self.tools[tool.spec.name] = tool
        self._validators = {
            name: Draft202012Validator(tool.spec.input_schema) for name, tool in self.tools.items()
        }

    def specs(self) -> list[ToolSpec]:
        return [tool.spec for tool in self.tools.values()]

    def extended(self, tools: Iterable[Tool]) -> Toolbox:
        """A new toolbox with these tools added (names must stay unique)."""
        return Toolbox([*self.tools.values(), *tools], self.root)

    def call(self, name: str, input: dict[str, Any]) -> ToolOutcome:
        tool = self.tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self.tools))
            return _error(f"unknown tool {name!r}; available tools: {known}")
        input = _filled(tool, input)
        problem = best_match(self._validators[name].iter_errors(input))
        if problem is not None:
            where = "/".join(str(p) for p in problem.absolute_path) or "arguments"
            return _error(f"invalid arguments for {name} ({where}): {problem.message}")
        try:
            return ToolOutcome(tool.handler(input))
        except ToolError as exc:
            return _error(f"{name}: {exc}", exc.detail)
        except Exception as exc:  # a bug in a handler must not end the agent's run
            return _error(f"{name} failed unexpectedly: {type(exc).__name__}: {exc}")


def clip_result(text: str, limit: int) -> str:
    """A tool result of at most about `limit` characters: a longer one keeps its
    head (two thirds) and tail, with a line in between saying how much was cut
    and how to see it."""
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    note = (
        f"\n[... {cut:,} of {len(text):,} characters cut here (a result shows at most "
        f"{limit:,}); to see them, ask for less at a time: read_file with offset_line and "
        "max_lines, a narrower path, pattern or command ...]\n"
    )
    head = limit * 2 // 3
    return text[:head] + note + text[len(text) - (limit - head) :]


def _filled(tool: Tool, input: dict[str, Any]) -> dict[str, Any]:
    """The arguments with absent optional properties filled in (see the module
    docstring); anything that is not an object is left for validation to refuse."""
    if not isinstance(input, dict):
        return input
    filled = dict(input)
    for key, schema in tool.spec.input_schema.get("properties", {}).items():
        if key in tool.defaults and filled.get(key) is None:
            filled[key] = tool.defaults[key]
        elif key not in filled and _allows_null(schema):
            filled[key] = None
    return filled


def _allows_null(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return False
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return any(_allows_null(branch) for branch in schema.get("anyOf", []))


def _error(message: str, detail: str = "") -> ToolOutcome:
    one_line = " / ".join(line.strip() for line in message.splitlines() if line.strip())
    if len(one_line) > MAX_ERROR_CHARS:
        one_line = one_line[: MAX_ERROR_CHARS - 3] + "..."
    if detail.strip():
        detail = detail.rstrip("\n")
        if len(detail) > MAX_ERROR_DETAIL_CHARS:
            cut = len(detail) - MAX_ERROR_DETAIL_CHARS
            detail = f"{detail[:MAX_ERROR_DETAIL_CHARS]}\n[... {cut:,} characters cut]"
        one_line += "\n" + detail
    return ToolOutcome(one_line, is_error=True)
