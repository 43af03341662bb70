"""The executor port: what every executor that is another program provides, and
what soda reads back from it.

A backend (`claude_code.CLAUDE_CODE`, `codex.CODEX`) says how to start its CLI
headless (`command`: the prompt, the model, every permission prompt and sandbox
of its own off, no settings, hooks or MCP servers of the person or the
repository), which environment points it at the proxy (`environment`, with
`@SODA_PORT@` for the jail's forwarded loopback port), where its model calls go
(`route`) and how to read its event stream (`read`: one JSON line at a time
into the `Transcript`). `BACKENDS` names them; the built-in agent is the third
executor, run by ACT directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from soda.agent.backends.proxy import Route
from soda.config import Config

PLACEHOLDER_KEY = "sk-soda-placeholder-the-real-key-stays-outside"
"""The key a CLI holds inside the jail; the proxy swaps in the real one."""


@dataclass
class Step:
    """One thing the CLI reported: text it said, or a tool it called."""

    kind: str
    """"said" or "tool"."""
    text: str


@dataclass
class Transcript:
    """What one CLI run said, read from its event stream."""

    steps: list[Step] = field(default_factory=list)
    result: str | None = None
    """Its final text (the executor's summary), once its result event came."""
    failed: str = ""
    """Why it failed by its own account (`is_error`, `turn.failed`), beating its exit code."""
    done: bool = False
    """Its final event came (`result`, `turn.completed`, `turn.failed`): a grace
    period starts, after which a CLI that has not exited is killed."""
    events: int = 0
    started: bool = False
    limited_until: float | None = None
    """When the provider's rate limit that refused the CLI resets (seconds since the
    epoch), by the CLI's own structural report of it (Claude Code's
    `rate_limit_event` with status `rejected`, Codex's usage-limit error event);
    never read from a tool's output or the model's text."""

    def said(self, text: str) -> Step | None:
        text = text.strip()
        if not text:
            return None
        step = Step("said", text)
        self.steps.append(step)
        return step

    def tool(self, name: str, detail: Any) -> Step:
        shown = detail if isinstance(detail, str) else _compact(detail)
        step = Step("tool", f"{name} {shown}".strip())
        self.steps.append(step)
        return step


@dataclass(frozen=True)
class Launch:
    """How a CLI starts one of its MCP servers (through soda's filter)."""

    command: str
    args: list[str]
    env: list[str]
    """Variables of the CLI's environment the server needs (its secrets)."""


class Backend(Protocol):
    """A coding CLI as soda's executor."""

    name: str

    def command(
        self, binary: str, prompt: str, model: str, options: Sequence[str] = ()
    ) -> list[str]:
        """The argv that runs one task headless, its events as JSON lines on stdout,
        with `options` (its MCP servers') before the prompt."""
        ...

    def mcp_options(self, servers: dict[str, Launch], directory: Path) -> list[str]:
        """The options that give it exactly these MCP servers (by name: how each is
        started, and the names of the variables it needs from the CLI's environment);
        a file it reads may be written into `directory` (bound read-only into the jail)."""
        ...

    def environment(self, home: str) -> dict[str, str]:
        """Variables for the CLI (values may hold `@SODA_PORT@`): the proxy's address,
        the placeholder key, the private `home`, telemetry and updates off."""
        ...

    def route(self, config: Config) -> tuple[Route, str]:
        """Where its model calls go, and the environment variable with the real key."""
        ...

    def model(self, config: Config) -> str:
        """The model it is asked for."""
        ...

    def read(self, event: dict[str, Any], transcript: Transcript) -> list[Step]:
        """Add one event to the transcript (setting `done` on its final one); the
        steps it added, for soda's events."""
        ...


def _compact(value: Any, width: int = 200) -> str:
    if isinstance(value, dict):
        for key in ("command", "cmd", "file_path", "path", "pattern"):
            if isinstance(value.get(key), str):
                return str(value[key])[:width]
    text = str(value)
    return text if len(text) <= width else text[: width - 1] + "…"
