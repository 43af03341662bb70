"""`soda mcp serve`, driven by the MCP SDK's own client: the server is a real
`soda -C DIR mcp serve` subprocess on stdio, the loop runs for real in a thread
with the behavioural fake model (`tests/test_approve_edit.py`'s waiting plan).
What the person says through MCP lands in `human_inputs` with provenance
`mcp:CLIENT`; a refusal is a tool error with its reason, nothing queued."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, Implementation, TextContent

from soda.store.db import open_db
from tests.conftest import soda
from tests.plan_fakes import new_project
from tests.test_approve_edit import project_waiting

CLIENT = "soda-test-client"

Talk = Callable[[ClientSession], Awaitable[None]]


def talk(root: Path, conversation: Talk, env: dict[str, str] | None = None) -> None:
    """Start `soda -C root mcp serve` and hold `conversation` with it."""
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "soda", "-C", str(root), "mcp", "serve"],
        env={"PATH": os.environ["PATH"], **(env or {})},
        cwd=str(root),
    )

    async def main() -> None:
        with open(root.parent / "mcp-server.log", "w") as errlog:
            async with stdio_client(server, errlog=errlog) as (read, write):
                info = Implementation(name=CLIENT, version="1.0")
                async with ClientSession(read, write, client_info=info) as session:
                    await session.initialize()
                    with anyio.fail_after(120):
                        await conversation(session)

    anyio.run(main)


def text_of(result: CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


async def ok(session: ClientSession, name: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(name, arguments)
    assert not result.is_error, (name, text_of(result))
    data = result.structured_content
    assert isinstance(data, dict), result
    return data


async def refused(session: ClientSession, name: str, **arguments: Any) -> str:
    result = await session.call_tool(name, arguments)
    assert result.is_error, (name, result)
    return text_of(result)


def inputs(root: Path) -> list[tuple[str, str, str]]:
    db = open_db(root / "state" / "soda.db")
    rows = db.execute("SELECT kind, source, payload_json FROM human_inputs ORDER BY id")
    return [(kind, source, payload) for kind, source, payload in rows]


def inbox(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "state" / "inbox").glob("*.json"))


def test_a_person_reads_tells_is_refused_approves_and_reads_history(tmp_path: Path) -> None:
    root, loop = project_waiting(tmp_path)
    seen: dict[str, Any] = {}

    async def conversation(session: ClientSession) -> None:
        names = {tool.name for tool in (await session.list_tools()).tools}
        assert {"status", "tell", "approve", "edit_plan", "history", "stop"} <= names
        seen["status"] = await ok(session, "status")
        seen["told"] = await ok(session, "tell", text="use argparse, not click")
        plan = await ok(session, "plan_to_edit", iteration=1)
        plan["tasks"][1]["depends_on"] = ["nowhere"]
        seen["bad edit"] = await refused(session, "edit_plan", iteration=1, plan=json.dumps(plan))
        seen["still"] = await ok(session, "status")
        seen["approved"] = await ok(session, "approve", iteration=1)
        await anyio.to_thread.run_sync(loop.finish)
        seen["history"] = await ok(session, "history", limit=5)
        seen["events"] = await ok(session, "events", since=0, kind="approval", limit=50)
        first = await ok(session, "events", since=0, kind="approval", limit=1)
        rest = await ok(session, "events", since=first["last_id"], kind="approval")
        seen["paged"] = [e["kind"] for e in first["events"] + rest["events"]]

    talk(root, conversation)
    waiting = json.dumps(seen["status"])
    assert "approval" in waiting and '"iteration": 1' in waiting, waiting
    assert "correction: use argparse, not click" in seen["told"]["queued"]
    assert "edited plan refused" in seen["bad edit"] and "nowhere" in seen["bad edit"]
    assert "the original plan still waits" in seen["bad edit"]
    before, after = (dict(seen[k], unread_inputs=None) for k in ("status", "still"))
    assert after == before  # the refused edit changed nothing: the plan still waits
    assert seen["approved"]["file"].endswith(f".mcp.{CLIENT}.json")
    numbers = [row["number"] for row in seen["history"]["iterations"]]
    assert numbers == [1], seen["history"]
    kinds = [event["kind"] for event in seen["events"]["events"]]
    assert kinds == ["approval.waiting", "approval.verdict"], kinds
    assert seen["paged"] == kinds  # asked again from last_id, nothing missed or repeated
    got = {kind: source for kind, source, _ in inputs(root)}
    assert got.get("approve") == f"mcp:{CLIENT}", got
    assert got.get("correction") == f"mcp:{CLIENT}", got
    assert "plan_edit" not in got


def test_a_bad_argument_is_a_tool_error_naming_it(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    open_db(root / "state" / "soda.db")  # soda made its state
    said: dict[str, str] = {}

    async def conversation(session: ClientSession) -> None:
        said["type"] = await refused(session, "approve", iteration="seven")
        said["none"] = await refused(session, "approve", iteration=99)
        said["kind"] = await refused(session, "tell", text="x", kind="gossip")
        said["empty"] = await refused(session, "tell", text="  ")
        said["limit"] = await refused(session, "events", limit=0)
        said["show"] = await refused(session, "show_iteration", number=4)
        said["edit"] = await refused(session, "edit_plan", iteration=1, plan="{not json")
        assert (await ok(session, "tasks"))["tasks"] == []
        assert (await ok(session, "events"))["events"] == []

    talk(root, conversation)
    assert "iteration" in said["type"]
    assert "no iteration 99" in said["none"]
    assert "cannot tell soda a 'gossip'" in said["kind"]
    assert "empty" in said["empty"]
    assert "limit" in said["limit"]
    assert "4" in said["show"]
    assert "no iteration 1" in said["edit"] or "no plan" in said["edit"], said["edit"]
    assert inbox(root) == [] and inputs(root) == []


def test_pause_resume_stop_are_queued_with_the_clients_name(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    open_db(root / "state" / "soda.db")

    async def conversation(session: ClientSession) -> None:
        for name in ("pause", "resume", "stop"):
            await ok(session, name)

    talk(root, conversation)
    names = inbox(root)
    assert [n.split("-")[1] for n in names] == ["pause", "resume", "stop"], names
    assert all(n.endswith(f".mcp.{CLIENT}.json") for n in names), names


@pytest.mark.parametrize(
    ("env", "said"),
    [({"SODA_JAIL": "1"}, "refuses to start inside soda's jail"), ({}, "no soda database")],
)
def test_refused_in_the_jail_or_without_soda_state(
    tmp_path: Path, env: dict[str, str], said: str
) -> None:
    root = new_project(tmp_path)
    if env:
        open_db(root / "state" / "soda.db")
    else:
        (root / "state" / "soda.db").unlink(missing_ok=True)
    done = soda_env(root, env, "mcp", "serve")
    assert done.returncode == 2, done
    assert said in done.stderr and "Traceback" not in done.stderr
    assert not (root / "state" / "inbox").exists() or inbox(root) == []


def soda_env(root: Path, env: dict[str, str], *args: str) -> Any:
    import subprocess

    return subprocess.run(
        [sys.executable, "-m", "soda", "-C", str(root), *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **env},
    )


def test_help_names_the_command(tmp_path: Path) -> None:
    done = soda("mcp", "serve", "--help", cwd=tmp_path)
    assert done.returncode == 0 and "claude mcp add" in done.stdout


@pytest.mark.parametrize(
    ("client", "source"),
    [
        ("claude-code", "mcp:claude-code"),
        ("Visual Studio Code", "mcp:visual-studio-code"),
        ("../../etc/passwd", "mcp:etc-passwd"),
        ("🙂", "mcp"),
        (None, "mcp"),
    ],
)
def test_the_clients_name_is_kept_as_a_safe_file_name(
    tmp_path: Path, client: str | None, source: str
) -> None:
    from soda.human import commands
    from soda.human.commands import Face, Provenance
    from soda.human.write import source_of

    said = commands.tell(Provenance(Face.MCP, client), "hello")
    path = commands.queue(tmp_path, said)
    assert path.parent == tmp_path / "inbox"
    assert source_of(path.name) == source
