"""The real Claude Code CLI (its pinned version, offline against the streaming
stand-in model, `tests/fakestream.py`) registered with `soda mcp serve`: the
stand-in has it read status, tell a correction, try a bad plan edit (refused,
the plan still waits), approve the waiting plan, then read history. What it
said lands in `human_inputs` with provenance `mcp:` and Claude Code's name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from soda.store.db import open_db
from tests.cli_executors import require_cli
from tests.fakestream import Seen, Step, StreamAPI, call, say
from tests.test_approve_edit import project_waiting

PREFIX = "mcp__soda__"


def results(body: Any) -> list[tuple[str, str, bool]]:
    """(tool, result text, is_error) of every soda tool call so far, in order."""
    names: dict[str, str] = {}
    done: list[tuple[str, str, bool]] = []
    for message in body.get("messages", []):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") == "tool_use":
                names[block["id"]] = block["name"]
            elif block.get("type") == "tool_result" and block["tool_use_id"] in names:
                raw = block.get("content")
                text = (
                    raw
                    if isinstance(raw, str)
                    else "".join(part.get("text", "") for part in raw or [])
                )
                done.append((names[block["tool_use_id"]], text, bool(block.get("is_error"))))
    return done


def supervisor(finished: Any) -> Any:
    """The stand-in model: one soda tool after another, then a final answer."""

    def respond(seen: Seen) -> Step:
        body = seen.body if isinstance(seen.body, dict) else {}
        if not any(t.get("name", "").startswith(PREFIX) for t in body.get("tools", [])):
            return say("no soda tools")  # a side request (titles, quota)
        so_far = results(body)
        step = len(so_far)
        if step == 0:
            return call(f"{PREFIX}status", {})
        if step == 1:
            return call(f"{PREFIX}tell", {"text": "use argparse, not click"})
        if step == 2:
            return call(f"{PREFIX}plan_to_edit", {"iteration": 1})
        if step == 3:
            plan, _ = json.JSONDecoder().raw_decode(so_far[-1][1].strip())
            plan["tasks"][1]["depends_on"] = ["nowhere"]
            return call(f"{PREFIX}edit_plan", {"iteration": 1, "plan": json.dumps(plan)})
        if step == 4:
            return call(f"{PREFIX}approve", {"iteration": 1})
        if step == 5:
            finished()  # the loop takes the approval and ends its iteration
            return call(f"{PREFIX}history", {"limit": 5})
        return say("done")

    return respond


def test_claude_code_supervises_soda_through_mcp(tmp_path: Path) -> None:
    binary = require_cli("claude-code")
    root, loop = project_waiting(tmp_path)
    api = StreamAPI(supervisor(loop.finish)).start()
    home = tmp_path / "home"
    home.mkdir()
    server = {"command": sys.executable, "args": ["-m", "soda", "-C", str(root), "mcp", "serve"]}
    try:
        done = subprocess.run(
            [str(binary), "-p", "Ask soda how it is doing, and approve plan 1.",
             "--output-format", "stream-json", "--verbose", "--model", "claude-sonnet-4-6",
             "--mcp-config", json.dumps({"mcpServers": {"soda": server}}),
             "--strict-mcp-config", "--dangerously-skip-permissions",
             "--setting-sources", "user", "--no-session-persistence"],
            cwd=root, capture_output=True, text=True, timeout=300,
            env={"PATH": os.environ["PATH"], "HOME": str(home), "IS_SANDBOX": "1",
                 "ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "sk-ant-stand-in",
                 "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
                 "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                 "ENABLE_TOOL_SEARCH": "false"},
        )  # fmt: skip
    finally:
        api.close()
    assert done.returncode == 0, done.stderr[-2000:]
    last = [r for r in api.model_requests() if isinstance(r.body, dict) and r.body.get("tools")]
    said = results(last[-1].body)
    assert [name.removeprefix(PREFIX) for name, _, _ in said] == [
        "status", "tell", "plan_to_edit", "edit_plan", "approve", "history",
    ], said  # fmt: skip
    errors = {name.removeprefix(PREFIX): text for name, text, error in said if error}
    assert list(errors) == ["edit_plan"], said
    assert "edited plan refused" in errors["edit_plan"], errors
    assert "the original plan still waits" in errors["edit_plan"]
    assert '"number": 1' in said[-1][1] or '"number":1' in said[-1][1], said[-1]
    db = open_db(root / "state" / "soda.db")
    rows = db.execute("SELECT kind, source FROM human_inputs ORDER BY id").fetchall()
    sources = {kind: source for kind, source in rows}
    assert set(sources) == {"correction", "approve"}, rows
    assert set(sources.values()) == {"mcp:claude-code"}, rows  # the name from its handshake
