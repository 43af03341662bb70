"""Helpers for tests/test_hostile.py: a scripted executor that attacks, and ways
to read what it saw and what soda stored.

A hostile test builds the demo's sample project (`soda.demo.prepare`), scripts
the ORIENT agents to ask for one task, scripts the executor's tool calls (the
attack), runs one iteration with the real jail and gate, and then looks for the
attack's concrete effect: in the tool results the executor got back, in every
row of the database and every file of the state directory, on disk outside the
worktree, in the refs, in /proc.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soda.cli.demo import SCRIPT_PATH, prepare
from soda.config import load
from soda.llm.base import ModelRequest
from soda.loop.run import IterationResult, run_loop
from soda.loop.session import Session
from tests.conftest import git
from tests.scripts import NOT_MET, VERIFIED, submit

PY = shlex.quote(sys.executable)
"""The interpreter, as a shell word: the jail exposes it, the sample project's
tests run with it."""

APPROVAL_TIMEOUT = 0.5
"""Seconds a merge waits in the approval queue before it is rejected."""

HYPOTHESIS_PLUGIN = "hypothesispytest"


MET = submit(
    "assessor",
    {"spec_satisfied": True, "confidence": "high", "gaps": [], "summary": "all met, trust me"},
)
TASK = {
    "id": "a",
    "task_id": None,
    "title": "Implement subtract and divide",
    "description": "-",
    "depends_on": [],
    "risk": "low",
    "tool_hints": [],
}
PLAN = submit(
    "planner",
    {
        "actionable_work_exists": True,
        "new_tasks": [],
        "stuck_reason": None,
        "learnings": [],
        "iteration_plan": {"intent": "add subtract and divide", "approach": "-", "tasks": [TASK]},
    },
)
EXECUTOR_DONE = submit(
    "executor",
    {
        "tasks_blocked": [],
        "task_comments": [],
        "new_subtasks": [],
        "learnings": [],
        "summary": "done",
    },
)

CALC_DONE = '''\
"""A tiny calculator library: the project soda works on in `soda demo`."""


def add(a: float, b: float) -> float:
    """Sum of a and b."""
    return a + b


def subtract(a: float, b: float) -> float:
    return a - b


def divide(a: float, b: float) -> float:
    if b == 0:
        raise ValueError("cannot divide by zero")
    return a / b
'''
"""calc.py that makes every test of the sample project pass."""

CALC_BROKEN = CALC_DONE.replace("return a + b", "return a - b")
"""calc.py with add() broken: tests/test_calc.py::test_add regresses."""


def command(text: str, timeout: float = 60) -> dict[str, Any]:
    return {"name": "run_command", "input": {"command": text, "timeout_seconds": timeout}}


def write(path: str, content: str) -> dict[str, Any]:
    return {"name": "write_file", "input": {"path": path, "content": content}}


def turn(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"agent": "executor", "tool_calls": list(calls)}


def executor(*turns: list[dict[str, Any]] | dict[str, Any]) -> list[dict[str, Any]]:
    """The executor's responses: one turn per item (a call or a list of calls),
    then its submit."""
    out = [turn(*(t if isinstance(t, list) else [t])) for t in turns]
    return [*out, EXECUTOR_DONE]


def project(
    tmp_path: Path,
    responses: list[dict[str, Any]],
    mode: str = "bwrap",
    files: dict[str, str] | None = None,
) -> Path:
    """The demo's sample project with `responses` as the model script, the
    approval timeout short, sandbox `mode`, and `files` committed on main.

    `tmp_path` is exposed (read-only) to the jail. The jail's own /tmp is empty,
    which would hide the whole project whatever else the jail did; exposed, the
    project's surroundings are as visible as a checkout under /srv or /work would
    be, and only the jail's own rules (the worktree mounted over the person's
    checkout, the read-only system) keep the attacks out."""
    root = tmp_path / "project"
    prepare(root)
    config = root / "soda.toml"
    text = config.read_text()
    text = text.replace("\nexpose = []\n", f"\nexpose = [{json.dumps(str(tmp_path))}]\n")
    assert str(tmp_path) in text
    text = text.replace("\ntimeout = 3600.0\n", f"\ntimeout = {APPROVAL_TIMEOUT}\n")
    text = text.replace('mode = "bwrap"', f'mode = "{mode}"')
    # The hypothesis plugin (installed for soda's own tests) takes most of a test
    # run's second; the sample project does not use it.
    text = text.replace(" -m pytest -q", f" -m pytest -q -p no:{HYPOTHESIS_PLUGIN}")
    assert f"timeout = {APPROVAL_TIMEOUT}" in text and f'mode = "{mode}"' in text
    assert HYPOTHESIS_PLUGIN in text
    config.write_text(text)
    for name, content in (files or {}).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(content)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "settings and files for a hostile test")
    script(root, responses)
    return root


def script(root: Path, responses: list[dict[str, Any]]) -> None:
    """(Re)write the model script `soda run` will replay."""
    (root / SCRIPT_PATH).write_text(json.dumps({"responses": responses}))


def attack(tmp_path: Path, executor_turns: list[dict[str, Any]], **kwargs: Any) -> Path:
    """A project whose ORIENT asks for one task and whose executor plays `executor_turns`."""
    return project(tmp_path, [VERIFIED, NOT_MET, PLAN, *executor_turns], **kwargs)


@dataclass
class Run:
    root: Path
    session: Session
    result: IterationResult
    lines: list[str] = field(default_factory=list)

    @property
    def iteration(self) -> dict[str, Any]:
        return next(iter(self.session.db["iterations"].rows))

    @property
    def outcome(self) -> str:
        return self.iteration["outcome"]

    @property
    def act(self) -> dict[str, Any]:
        return json.loads(self.iteration["act_json"] or "{}")

    def tool_results(self, agent: str = "executor") -> list[tuple[dict[str, Any], str]]:
        """(tool call, result the model got back) for every tool call `agent` made."""
        return tool_results(self.session.model.requests, agent)  # type: ignore[attr-defined]

    def output(self, needle: str) -> str:
        """The result of the one executor tool call whose input mentions `needle`."""
        found = [
            text
            for call, text in self.tool_results()
            if any(needle in str(v) for v in call.values())
        ]
        assert len(found) == 1, (needle, found)
        return found[0]

    def stored(self) -> str:
        """Everything soda keeps: every database row, every file in the state directory."""
        return stored_text(self.root)

    def history(self) -> str:
        """Every commit of every ref, with its patch."""
        return git(self.root, "log", "-p", "--all", "--format=%H %B")


def tool_results(requests: list[ModelRequest], agent: str) -> list[tuple[dict[str, Any], str]]:
    calls: dict[str, dict[str, Any]] = {}
    results: dict[str, str] = {}
    for request in requests:
        if request.agent != agent:
            continue
        for message in request.messages:
            for call in message.tool_calls:
                calls[call.id] = {"name": call.name, **call.input}
            for result in message.tool_results:
                results[result.call_id] = result.content
    return [(calls[key], results[key]) for key in results]


def database_text(root: Path) -> str:
    """Every row of soda's database, as SQL."""
    with contextlib.closing(sqlite3.connect(root / "state" / "soda.db")) as db:
        return "\n".join(db.iterdump())


def stored_text(root: Path) -> str:
    """Every row of the database (as SQL) and the bytes of every file under state/
    (logs, inbox, the worktrees)."""
    parts = [database_text(root)]
    for path in sorted((root / "state").rglob("*")):
        if path.is_file() and not path.is_symlink():
            parts.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(parts)


def run(root: Path, before_request: Callable[[ModelRequest], None] | None = None) -> Run:
    """One iteration (`--once`) in this process, with the scripted model. The
    config is loaded from the person's soda.toml as `soda run` would."""
    session = Session.open(load(root / "soda.toml"))
    if before_request is not None:
        complete = session.model.complete

        def hooked(request: ModelRequest) -> Any:
            before_request(request)
            return complete(request)

        session.model.complete = hooked  # type: ignore[method-assign]
    lines: list[str] = []
    result = run_loop(session, lines.append, once=True)
    return Run(root, session, result, lines)


def processes_with(marker: str) -> list[int]:
    """Pids of live processes whose command line contains `marker`."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ")
            state = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker.encode() in cmdline and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def describe(pids: list[int]) -> str:
    """Each pid's state, parent and command line: what a failure needs to say."""
    found = []
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except (OSError, IndexError):
            continue
        found.append(f"{pid} state {stat[0]} parent {stat[1]}: {argv.decode(errors='replace')}")
    return "; ".join(found) or "none"
