"""Codex as soda's executor: `codex exec --json`, its model provider overridden.

The provider is soda's (`model_providers.soda`: the proxy's address, the
Responses API, the placeholder key's variable), the person's config ignored
(`--ignore-user-config`, a private CODEX_HOME), no MCP server but `[mcp.servers]`'
for the executor (`-c mcp_servers.NAME=...`), no exec-policy rules, its own
approvals and sandbox bypassed: soda's jail is the perimeter. Stdin is closed
(it reads it otherwise). Its events: `thread.started`, `turn.started`,
`item.started`/`item.completed` (agent messages, commands, file changes),
`turn.completed`, and `turn.failed`, which beats its exit code (an `error`
event may be a retry's notice). Codex's own usage-limit error (in an `error` or
`turn.failed` event, never an item's text) says when to try again ("try again
in 2 hours 5 minutes"): soda waits it out (soda.agent.quota); a spent API rate
limit is read by the egress proxy from the 429's headers.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from soda.agent.backends.port import PLACEHOLDER_KEY, Launch, Step, Transcript
from soda.agent.backends.proxy import Route
from soda.config import Config

DEFAULT_UPSTREAM = "https://api.openai.com"
DEFAULT_MODEL = "gpt-5-codex"
KEY_VARIABLE = "SODA_CODEX_KEY"
"""The variable holding the placeholder key inside the jail."""
USAGE_LIMIT = re.compile(r"you've hit your usage limit.*?try again in ([^.]+)", re.I | re.S)
"""Codex's own words when the account's limit is spent, with when it resets."""
UNIT = re.compile(r"(\d+)\s*(day|hour|minute|second)s?", re.I)
UNIT_SECONDS = {"day": 86_400, "hour": 3_600, "minute": 60, "second": 1}


class Codex:
    name = "codex"

    def command(
        self, binary: str, prompt: str, model: str, options: Sequence[str] = ()
    ) -> list[str]:
        provider = (
            '{name="soda", base_url="http://127.0.0.1:@SODA_PORT@/v1", '
            f'env_key="{KEY_VARIABLE}", wire_api="responses"}}'
        )
        return [
            binary, "exec", "--json", "--skip-git-repo-check", "--ephemeral",
            "--ignore-user-config", "--ignore-rules",
            "--dangerously-bypass-approvals-and-sandbox",
            "-c", "model_provider=soda", "-c", f"model_providers.soda={provider}",
            "-c", "mcp_servers={}", "-c", "analytics.enabled=false",
            "-c", "check_for_update_on_startup=false", *options, "-m", model, prompt,
        ]  # fmt: skip

    def mcp_options(self, servers: dict[str, Launch], directory: Path) -> list[str]:
        """One `-c mcp_servers.NAME={...}` each, over the empty table (the person's
        config is ignored); `env_vars` passes the named variables through."""
        options = []
        for name, launch in servers.items():
            table = (
                f"{{command={json.dumps(launch.command)}, args={json.dumps(launch.args)},"
                f" env_vars={json.dumps(launch.env)}}}"
            )
            options += ["-c", f"mcp_servers.{name}={table}"]
        return options

    def environment(self, home: str) -> dict[str, str]:
        return {KEY_VARIABLE: PLACEHOLDER_KEY, "HOME": home, "CODEX_HOME": f"{home}/.codex"}

    def route(self, config: Config) -> tuple[Route, str]:
        executor = config.executor
        upstream = (executor.base_url or DEFAULT_UPSTREAM).rstrip("/")
        key_env = executor.api_key_env or "OPENAI_API_KEY"
        paths = frozenset({"/v1/responses"})
        return Route(upstream, paths, "responses", "authorization", "openai"), key_env

    def model(self, config: Config) -> str:
        return config.executor.model or DEFAULT_MODEL

    def read(self, event: dict[str, Any], transcript: Transcript) -> list[Step]:
        kind = event.get("type")
        steps: list[Step] = []
        item = event.get("item") if isinstance(event.get("item"), dict) else {}
        if kind == "thread.started":
            transcript.started = True
        elif kind == "item.completed" and item:
            what = item.get("type")
            if what == "agent_message":
                text = str(item.get("text") or "")
                step = transcript.said(text)
                steps += [step] if step else []
                transcript.result = text  # the last one is the summary
            elif what == "command_execution":
                steps.append(transcript.tool("shell", str(item.get("command") or "")))
            elif what == "file_change":
                changes = item.get("changes") or []
                paths = [str(c.get("path")) for c in changes if isinstance(c, dict)]
                steps.append(transcript.tool("file_change", ", ".join(paths)))
            elif what in ("mcp_tool_call", "web_search"):
                steps.append(transcript.tool(str(what), item))
        elif kind == "turn.completed":
            transcript.result, transcript.done = transcript.result or "", True
        elif kind == "turn.failed":
            error = event.get("error") or {}
            message = error.get("message") if isinstance(error, dict) else error
            transcript.failed = f"codex turn failed: {message}"[:500]
            transcript.result, transcript.done = transcript.result or "", True
            _usage_limit(str(message), transcript)
        elif kind == "error":  # a retry's notice too: only turn.failed is final
            _usage_limit(str(event.get("message")), transcript)
            step = transcript.said(f"error: {event.get('message')}")
            steps += [step] if step else []
        return steps


def _usage_limit(message: str, transcript: Transcript) -> None:
    """Codex's usage-limit error: the limit resets after the time it names."""
    found = USAGE_LIMIT.search(message)
    if found is None:
        return
    seconds = sum(int(n) * UNIT_SECONDS[unit.lower()] for n, unit in UNIT.findall(found[1]))
    if seconds > 0:
        transcript.limited_until = time.time() + seconds


CODEX = Codex()
