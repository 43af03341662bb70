"""What the fleet's tests share: sample projects behind bare remotes, `soda
worker` processes (real subprocesses, killed by pid), and waits on what the
Temporal server says about a run."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soda.cli.demo import prepare
from soda.fleet import client as fleet_client
from tests.conftest import git, wait_for

ROOT = Path(__file__).resolve().parent.parent
DEMO = json.loads((ROOT / "soda" / "demo" / "script.json").read_text())["responses"]
SCRIPT = "fleet-script.json"
"""Committed in the sample (state/ is not): every clone replays the same script."""


def by_iteration(*iterations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A script from each iteration's answers in turn, the first of each marked
    with its number (an iteration with none has no mark): a run that goes on with
    a new model (on another worker, or after it waited) goes on from its place."""
    script: list[dict[str, Any]] = []
    for number, answers in enumerate(iterations, 1):
        if answers:
            first, *rest = answers
            script += [{**first, "iteration": number}, *rest]
    return script


DEMO_RUN = by_iteration(DEMO[:10], DEMO[10:])
"""The demo's two iterations: iteration 1 merges, iteration 2 finds the spec met."""


def remote_project(
    tmp_path: Path,
    name: str,
    responses: list[dict[str, Any]] = DEMO_RUN,
    latency: float = 0.0,
    notified: Path | None = None,
    windows: list[str] | None = None,
) -> str:
    """The demo's sample project with its script, pushed to a bare repository;
    the bare repository's path (the run's URL). With `notified`, its
    `notify_command` appends "EVENT ITERATION" to that file; `windows`: its
    `[daemon] windows`."""
    src = tmp_path / f"{name}-src"
    prepare(src)
    python = json.dumps(sys.executable)[1:-1]
    script = {"latency_seconds": latency, "responses": responses}
    (src / SCRIPT).write_text(json.dumps(script).replace("{python}", python))
    toml = src / "soda.toml"
    text = toml.read_text().replace("state/demo-script.json", SCRIPT)
    if notified is not None:
        command = f'echo "$SODA_EVENT $SODA_ITERATION" >> {shlex.quote(str(notified))}'
        unset = "# notify_command = (not set)"
        assert text.count(unset) == 1
        text = text.replace(unset, f"notify_command = {json.dumps(command)}")
    if windows is not None:
        assert text.count("windows = []") == 1
        text = text.replace("windows = []", f"windows = {json.dumps(windows)}")
    toml.write_text(text)
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "fleet script")
    bare = tmp_path / f"{name}.git"
    git(tmp_path, "clone", "-q", "--bare", str(src), str(bare))
    return str(bare)


class PushGate:
    """A pre-receive hook on a bare remote that holds the first push until the
    test says "accept" or "refuse" (later pushes go through): a worker can be
    killed between a merge and its push."""

    def __init__(self, bare: str) -> None:
        self.dir = Path(bare).parent / f"{Path(bare).name}-gate"
        self.dir.mkdir()
        hook = Path(bare) / "hooks" / "pre-receive"
        hook.write_text(
            "#!/bin/sh\n"
            f'if mkdir "{self.dir}/first" 2>/dev/null; then\n'
            f'  while [ ! -f "{self.dir}/word" ]; do sleep 0.05; done\n'
            f'  [ "$(cat "{self.dir}/word")" != refuse ] || exit 1\n'
            "fi\n"
        )
        hook.chmod(0o755)

    def holding(self) -> bool:
        return (self.dir / "first").is_dir()

    def answer(self, word: str) -> None:
        (self.dir / "word").write_text(word)


@dataclass
class WorkerProcess:
    process: subprocess.Popen[bytes]
    name: str
    cache: Path
    log: Path

    def kill(self) -> None:
        """SIGKILL the worker (its own process group: the jail's commands too)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.kill()


def start_worker(address: str, home: Path, label: str, slots: int = 2) -> WorkerProcess:
    """`soda worker` as a real subprocess; returns once it polls."""
    home.mkdir(parents=True, exist_ok=True)
    ready = home / f"{label}.ready"
    log = home / f"{label}.log"
    cache = home / f"{label}-cache"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "soda", "worker", "--address", address]
    argv += ["--slots", str(slots), "--cache", str(cache), "--ready-file", str(ready)]
    with log.open("wb") as sink:
        process = subprocess.Popen(
            argv, stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    worker = WorkerProcess(process, "", cache, log)
    try:
        wait_for(lambda: ready.exists() or process.poll() is not None, 30, f"worker {label}")
    except AssertionError:
        worker.stop()
        raise
    if process.poll() is not None:
        raise AssertionError(f"worker {label} exited: {log.read_text()}")
    worker.name = ready.read_text()
    return worker


def describe(address: str, run: str) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        client = await fleet_client.connect(address)
        return await fleet_client.describe(client, run)

    return asyncio.run(go())


def wait_status(address: str, run: str, wanted: set[str], seconds: float) -> dict[str, Any]:
    """Wait until the run's status is one of `wanted`; its description."""
    seen: dict[str, Any] = {}

    def reached() -> dict[str, Any] | None:
        seen.update(describe(address, run))
        return dict(seen) if seen["status"]["status"] in wanted else None

    try:
        return wait_for(reached, seconds, f"{run} to reach {wanted}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last seen: {json.dumps(seen, indent=1)}") from None


def _planner_with(*tasks: dict[str, Any]) -> dict[str, Any]:
    entry = json.loads(json.dumps(DEMO[4]))
    entry["tool_calls"][0]["input"]["iteration_plan"]["tasks"] = list(tasks)
    return entry


_NOTES_TASK = {
    "id": "b",
    "task_id": None,
    "title": "Write NOTES.md",
    "description": "Say in NOTES.md what calc offers.",
    "depends_on": ["a"],
    "risk": "low",
    "tool_hints": [],
}
_NOTES_EXECUTOR = [
    {
        "agent": "executor",
        "tool_calls": [
            {"name": "write_file", "input": {"path": "NOTES.md", "content": "add, subtract\n"}}
        ],
    },
    {
        "agent": "executor",
        "tool_calls": [
            {
                "name": "submit",
                "input": {
                    "tasks_blocked": [],
                    "task_comments": [],
                    "new_subtasks": [],
                    "learnings": [],
                    "summary": "NOTES.md says what calc offers.",
                },
            }
        ],
    },
]
TWO_TASKS = by_iteration(
    [
        *DEMO[:4],
        _planner_with(DEMO[4]["tool_calls"][0]["input"]["iteration_plan"]["tasks"][0], _NOTES_TASK),
        *DEMO[5:10],
        *_NOTES_EXECUTOR,
    ],
    DEMO[10:],
)
"""Iteration 1 merges task a, then works on task b (with the model's latency)
before its own merge: a window in which the first merge is only on the worker."""
ASKING = by_iteration(
    [
        *DEMO[:4],
        {
            "agent": "planner",
            "tool_calls": [
                {"name": "ask_human", "input": {"question": "Is rounding in the spec?"}}
            ],
        },
    ],
    DEMO[:10],
    DEMO[10:],
)
"""The planner asks in iteration 1 (STUCK); after the answer the demo runs."""


def _planner_adding(*later: dict[str, Any]) -> dict[str, Any]:
    entry = json.loads(json.dumps(DEMO[4]))
    entry["tool_calls"][0]["input"]["new_tasks"] = list(later)
    return entry


LATER_TASK = {
    "title": "Describe calc in NOTES.md",
    "description": "A later task: NOTES.md says what calc offers.",
    "risk": "low",
}
WITH_LATER_TASK = by_iteration([*DEMO[:4], _planner_adding(LATER_TASK), *DEMO[5:10]], DEMO[10:])
"""The demo, with ORIENT of iteration 1 adding a Trace task for later (task 2;
the plan's task is 3): still open when the run reaches DONE."""
