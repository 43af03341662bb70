"""Claude Code as soda's executor: `claude -p` with stream-json events.

Headless and bare: `--bare` (no hooks, no CLAUDE.md discovery, no plugins, the
key only from the environment), `--setting-sources user` (the private, empty
home: no person's or repository's settings), `--strict-mcp-config` (no MCP
server but the executor's `[mcp.servers]`, in soda's `--mcp-config`),
permissions bypassed (`IS_SANDBOX=1`, which it needs when run as root): soda's
jail is the perimeter. Its events: `system/init`, `assistant` messages
(text and `tool_use` blocks), `user` messages (tool results), and one `result`
whose `is_error` and `subtype` are authoritative (an error may exit 0). A
`rate_limit_event` whose status is `rejected` says the subscription's or key's
limit is spent until its `resetsAt`: soda waits it out (soda.agent.quota).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from soda.agent.backends.port import PLACEHOLDER_KEY, Launch, Step, Transcript
from soda.agent.backends.proxy import Route
from soda.config import Config

DEFAULT_UPSTREAM = "https://api.anthropic.com"


class ClaudeCode:
    name = "claude-code"

    def command(
        self, binary: str, prompt: str, model: str, options: Sequence[str] = ()
    ) -> list[str]:
        return [
            binary, "-p", prompt, "--output-format", "stream-json", "--verbose",
            "--model", model, "--dangerously-skip-permissions", "--bare",
            "--setting-sources", "user", "--strict-mcp-config", "--no-session-persistence",
            *options,
        ]  # fmt: skip

    def mcp_options(self, servers: dict[str, Launch], directory: Path) -> list[str]:
        """`--mcp-config` with a file soda writes (`--strict-mcp-config` stays: no
        other server counts); a stdio server inherits the CLI's environment."""
        if not servers:
            return []
        described = {
            name: {"type": "stdio", "command": launch.command, "args": launch.args}
            for name, launch in servers.items()
        }
        path = directory / "mcp.json"
        path.write_text(json.dumps({"mcpServers": described}), encoding="utf-8")
        return ["--mcp-config", str(path)]

    def environment(self, home: str) -> dict[str, str]:
        return {
            "ANTHROPIC_BASE_URL": "http://127.0.0.1:@SODA_PORT@",
            "ANTHROPIC_API_KEY": PLACEHOLDER_KEY,
            "HOME": home,
            "IS_SANDBOX": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }

    def route(self, config: Config) -> tuple[Route, str]:
        executor, model = config.executor, config.model
        upstream = (
            executor.base_url
            or model.base_url
            or os.environ.get("ANTHROPIC_BASE_URL")
            or DEFAULT_UPSTREAM
        )
        paths = frozenset({"/v1/messages", "/v1/messages/count_tokens"})
        key_env = executor.api_key_env or model.api_key_env
        return Route(upstream.rstrip("/"), paths, "messages", "x-api-key", "anthropic"), key_env

    def model(self, config: Config) -> str:
        return config.executor.model or config.model.strong

    def read(self, event: dict[str, Any], transcript: Transcript) -> list[Step]:
        kind = event.get("type")
        steps: list[Step] = []
        if kind == "system" and event.get("subtype") == "init":
            transcript.started = True
        elif kind == "assistant":
            message = event.get("message") or {}
            for block in message.get("content") or []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text":
                    step = transcript.said(str(block.get("text") or ""))
                    steps += [step] if step else []
                elif block.get("type") == "tool_use":
                    steps.append(transcript.tool(str(block.get("name")), block.get("input")))
        elif kind == "rate_limit_event":
            _rate_limit(event.get("rate_limit_info"), transcript)
        elif kind == "result":
            text = str(event.get("result") or "")
            transcript.result, transcript.done = text, True
            subtype = str(event.get("subtype") or "")
            if event.get("is_error") or (subtype and subtype != "success"):
                errors = event.get("errors") or []
                why = text or "; ".join(str(e) for e in errors) or subtype or "is_error"
                transcript.failed = f"claude-code ended with an error ({subtype}): {why}"[:500]
        return steps


def _rate_limit(info: Any, transcript: Transcript) -> None:
    """A `rate_limit_event`: `rejected` means the limit is spent until `resetsAt`
    (seconds since the epoch); `allowed` and `allowed_warning` change nothing."""
    if not isinstance(info, dict) or info.get("status") != "rejected":
        return
    resets = info.get("resetsAt")
    if isinstance(resets, int | float) and not isinstance(resets, bool) and resets > 0:
        transcript.limited_until = max(float(resets), transcript.limited_until or 0.0)


CLAUDE_CODE = ClaudeCode()
