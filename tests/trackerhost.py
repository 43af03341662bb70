"""The daemon working the tracker's queue, one look at a time, for tests: the
demo's project with pull requests and the tracker on, against the GitHub
stand-in (tests/fakeforge.py), its daemon after the preflight (`Host`, the
`host` fixture: the demo's script, or the one a test gives as its param), and
the scripted model's answers (`said`, `working`).

    pytest_plugins = ("tests.fakeforge", "tests.trackerhost")    # then `host`

PYTEST_DONT_REWRITE: test modules import its names before pytest loads it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from soda.contracts.outcomes import RunStatus
from soda.daemon.process import Daemon
from soda.loop.host import Run
from soda.store import tracker as rows
from soda.system.lock import release_lock
from tests.fakeforge import FakeForge
from tests.plan_fakes import NOT_MET, VERIFIED, plan, planning, task
from tests.test_forge_loop import with_forge
from tests.test_loop import DEMO_SCRIPT, project

DONE = {
    "tasks_blocked": [], "task_comments": [], "new_subtasks": [], "learnings": [],
    "summary": "wrote the note",
}  # fmt: skip
CRITERIA = """Subtract and divide for calc.

- [ ] `calc.subtract(a, b)` returns `a - b` (`tests/test_acceptance.py::test_subtract`).
- [ ] `calc.divide(a, b)` returns `a / b` (`tests/test_acceptance.py::test_divide`).
- [ ] `calc.divide(a, 0)` raises `ValueError("cannot divide by zero")` \
(`tests/test_acceptance.py::test_divide_by_zero_is_a_clear_error`).
"""
"""An issue's body: three acceptance criteria the demo's script meets."""
TRACKER_ON = {
    "enabled = false\n# The label that means": "enabled = true\n# The label that means",
    "model\n# call.\npoll_seconds = 60.0": "model\n# call.\npoll_seconds = 0.0",
}
TICKS = 12
"""Looks the daemon gets to reach an ending (the demo needs 2 iterations)."""


def said(agent: str, tool: str, **given: Any) -> dict[str, Any]:
    """A scripted answer: `agent` calls `tool` with `given`."""
    return {"agent": agent, "tool_calls": [{"name": tool, "input": given}]}


def working(iterations: int) -> list[dict[str, Any]]:
    """A script of `iterations` iterations that each merge a note and go on."""
    script: list[dict[str, Any]] = []
    for k in range(1, iterations + 1):
        script += [
            said("verifier", "submit", **VERIFIED),
            said("assessor", "submit", **NOT_MET),
            said("planner", "submit", **planning(plan(task(f"n{k}")))),
            said("executor", "write_file", path=f"notes/n{k}.txt", content=f"note {k}"),
            said("executor", "submit", **DONE),
        ]
    return script


@dataclass
class Host:
    root: Path
    daemon: Daemon
    run: Run
    forge: FakeForge

    def tick(self) -> None:
        self.daemon.issues.last_poll = float("-inf")  # type: ignore[union-attr]  # read now
        self.daemon._tick(self.run)

    def until(self, number: int, *states: str) -> rows.TrackerItem:
        for _ in range(TICKS):
            self.tick()
            item = rows.item(self.run.db, number)
            if item is not None and item.state in states:
                return item
        raise AssertionError(
            f"issue #{number} never reached {states}: {rows.item(self.run.db, number)}"
        )

    def posted(self, number: int) -> list[str]:
        return [c["body"] for c in self.forge.issue_comments.get(number, [])]


@pytest.fixture
def host(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    fake_forge: FakeForge,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Host]:
    """The demo's project with pull requests and the tracker on, its daemon after
    the preflight; the demo's script, or the one the test gives as its param."""
    root = project(tmp_path, getattr(request, "param", DEMO_SCRIPT))
    config = root / "soda.toml"
    text = config.read_text()
    for old, new in TRACKER_ON.items():
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    config.write_text(text)
    with_forge(root, fake_forge, monkeypatch)
    daemon = Daemon(config)
    run = daemon._preflight()
    try:
        yield Host(root, daemon, run, fake_forge)
    finally:
        daemon.flags.stop.set()
        if daemon.issues is not None:
            daemon.issues.finish(RunStatus.STOPPED, "test over")
        run.finish(RunStatus.STOPPED, "test over")
        release_lock(daemon.config.state_dir)
        run.db.conn.close()
