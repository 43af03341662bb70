"""What the coding-CLI executor tests share: the demo project configured for a
CLI backend, a streaming stand-in API, and the real CLIs at their pinned
versions (installed by scripts/setup-tests; a test that finds one missing
fails, naming the set-up).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from soda.agent.backends.pins import binary_version, installed_binary
from soda.agent.executors import PINS
from soda.loop.run import run_loop
from soda.loop.session import Session
from tests.conftest import git
from tests.fakestream import Seen, Step, StreamAPI, call, say
from tests.plan_fakes import fake_model, new_project, open_session, plan, task

KEY_ENV = "SODA_TEST_EXECUTOR_KEY"
STAND_IN_PRICES = """
[model.prices."claude-sonnet-4-6"]
input = 3.0
output = 15.0
cache_write = 3.75
cache_read = 0.3

[model.prices."gpt-5-codex"]
input = 1.25
output = 10.0
cache_read = 0.125
"""
"""The stand-in API is on 127.0.0.1, where soda takes a model to be local and
free: the CLIs' models are priced here as the real ones are."""
SECRET = "sk-ant-real-secret-0123456789-must-never-enter-the-jail"


def require_cli(backend: str) -> Path:
    """The pinned CLI, installed; a failure naming the set-up when it is not."""
    pin = PINS[backend]
    binary = installed_binary(pin)
    assert binary.exists(), (
        f"{pin.package} {pin.version} is not installed at {binary}: run scripts/setup-tests "
        f"(it runs `.venv/bin/soda tools install claude-code codex`)"
    )
    assert binary_version(binary) == pin.version, f"{binary} is not {pin.version}"
    return binary


def cli_project(
    tmp_path: Path,
    backend: str,
    api: StreamAPI,
    settings: dict[str, str] | None = None,
    default: str | None = None,
    **executor: Any,
) -> Path:
    """The demo's sample project with `[executor]` set to `backend` (or `default`,
    with `backend` then for the tasks that ask for it) behind `api`, and
    `settings` replacing lines of its soda.toml."""
    require_cli(backend)
    root = new_project(tmp_path, settings)
    chosen = {
        "backend": default or backend,
        "base_url": api.url,
        "api_key_env": KEY_ENV,
        "task_timeout": 120,  # a test's bounds, should a CLI misbehave
        "idle_timeout": 60,
        **executor,
    }
    lines = [f"{key} = {json.dumps(value)}" for key, value in chosen.items()]
    config = root / "soda.toml"
    text = re.sub(r"\n\[executor\]\n(?:[^\[].*\n|\n)*", "\n", config.read_text())
    config.write_text(text + "\n[executor]\n" + "\n".join(lines) + "\n" + STAND_IN_PRICES)
    git(root, "commit", "-q", "-am", "executor")
    return root


def run_once(root: Path, the_plan: dict[str, Any] | None = None) -> Session:
    """One iteration: ORIENT's agents faked at the model boundary, the task done by the CLI."""
    os.environ[KEY_ENV] = SECRET
    session = open_session(root, fake_model(the_plan or plan(task("a"))))
    run_loop(session, lambda line: None, once=True)
    return session


def outcome(session: Session) -> str:
    (row,) = list(session.db["iterations"].rows)
    return str(row["outcome"])


def last_tool_result(seen: Seen) -> str | None:
    """The text of the last tool result the CLI sent (Messages or Responses API)."""
    body = seen.body if isinstance(seen.body, dict) else {}
    for message in reversed(body.get("messages") or []):
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    inner = block.get("content")
                    return inner if isinstance(inner, str) else json.dumps(inner)
        if message.get("role") == "user":
            break
    for item in reversed(body.get("input") or []):
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            output = item.get("output")
            return output if isinstance(output, str) else json.dumps(output)
    return None


def shell_tool(seen: Seen) -> str:
    """The CLI's shell tool, by the API it speaks."""
    return "Bash" if seen.path.startswith("/v1/messages") else "exec_command"


def shell(seen: Seen, command: str) -> Step:
    if shell_tool(seen) == "Bash":
        return call("Bash", {"command": command, "description": "run"})
    return call("exec_command", {"cmd": command})


def scripted(*commands: str, final: str = "wrote the note") -> Callable[[Seen], Step]:
    """A model that runs `commands` one per turn in the CLI's shell, then says `final`."""

    def respond(seen: Seen) -> Step:
        body = seen.body if isinstance(seen.body, dict) else {}
        if not body.get("tools"):
            return say("a title")
        done = count_results(body)
        return shell(seen, commands[done]) if done < len(commands) else say(final)

    return respond


def count_results(body: dict[str, Any]) -> int:
    found = 0
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, list):
            found += sum(
                1 for b in content if isinstance(b, dict) and b.get("type") == "tool_result"
            )
    found += sum(
        1
        for i in body.get("input") or []
        if isinstance(i, dict) and i.get("type") == "function_call_output"
    )
    return found


def running(directory: Path, marker: str, start: bool = False) -> list[int]:
    """Processes working under `directory` (a test's own: tests run side by side)
    whose command line holds `marker` (`start`: begins with it), jailed or not."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        found_it = cmdline.startswith(marker) if start else marker in cmdline
        if cwd.startswith(str(directory)) and found_it:
            found.append(int(entry.name))
    return found
