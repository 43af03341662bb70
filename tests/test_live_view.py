"""The live view through the real CLI: `soda events` (past events, --kind, --json,
and -f following new ones until Ctrl-C) and the progress `soda run` prints while
it works (phase, agent, turn, tokens, elapsed), driven by the events it emits."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from soda.events import Events
from soda.store import open_db
from tests.conftest import soda
from tests.test_cli_small import scripted_project

DEADLINE = 60.0


def initialised(repo: Path) -> Path:
    result = soda("init", cwd=repo)
    assert result.returncode == 0, result.stderr
    return repo


def emitter(repo: Path) -> Events:
    """An Events writer on the project's database, as a running soda has."""
    state = repo / "state"
    return Events(open_db(state / "soda.db"), state / "logs" / "events.jsonl")


class Follower:
    """`soda events -f ...` in a subprocess, its stdout read line by line."""

    def __init__(self, repo: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "soda", "events", "-f", *args],
            cwd=repo,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, text: str) -> list[str]:
        """Every line read until one contains `text` (fails after DEADLINE)."""
        deadline = time.monotonic() + DEADLINE
        while not any(text in line for line in self.seen):
            left = deadline - time.monotonic()
            assert left > 0, f"no line with {text!r} within {DEADLINE}s; read: {self.seen}"
            try:
                self.seen.append(self.lines.get(timeout=min(left, 0.5)))
            except queue.Empty:
                assert self.proc.poll() is None, self.proc.stderr.read()  # type: ignore[union-attr]
        return self.seen

    def sync(self, events: Events, kind: str) -> None:
        """Emit `kind` until the follower prints it: from then on it is following."""
        deadline = time.monotonic() + DEADLINE
        while not any(kind in line for line in self.seen):
            assert time.monotonic() < deadline, f"the follower never printed {kind}"
            events.emit(kind, {})
            try:
                self.seen.append(self.lines.get(timeout=0.5))
            except queue.Empty:
                assert self.proc.poll() is None, self.proc.stderr.read()  # type: ignore[union-attr]
        self.seen.clear()

    def interrupt(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(timeout=DEADLINE)
        assert self.proc.stderr is not None
        return code, self.proc.stderr.read()


def test_events_follow_prints_new_events_and_ends_cleanly_on_ctrl_c(repo: Path) -> None:
    events = emitter(initialised(repo))
    events.emit("test.before", {"n": 0})
    follower = Follower(repo, "--json")
    try:
        follower.wait_for('"test.before"')  # the past first, then new ones
        events.emit("act.merged", {"commit": "abc123", "branch": "soda/spec"})
        events.emit("test.after", {"n": 2})
        lines = follower.wait_for('"test.after"')
    finally:
        code, stderr = follower.interrupt()
    assert code == 0, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    records = [json.loads(line) for line in lines]
    assert [r["kind"] for r in records] == ["test.before", "act.merged", "test.after"]
    merged = records[1]
    assert merged["data"] == {"commit": "abc123", "branch": "soda/spec"}
    assert set(merged) == {"id", "ts", "run_id", "iteration", "kind", "data"}
    assert records[0]["id"] < records[1]["id"] < records[2]["id"]


def test_events_follow_with_kind_shows_only_that_kind(repo: Path) -> None:
    events = emitter(initialised(repo))
    follower = Follower(repo, "--kind", "act", "--limit", "0")
    try:
        follower.sync(events, "act.sync")
        events.emit("agent.turn", {"agent": "executor", "turn": 1})
        events.emit("act.merged", {"commit": "feed"})
        events.emit("inbox.rejected", {"file": "x"})
        events.emit("act.start", {"intent": "last"})
        lines = follower.wait_for("act.start")
    finally:
        code, stderr = follower.interrupt()
    assert code == 0, stderr
    kinds = [line.split()[2] for line in lines]
    assert [kind for kind in kinds if kind != "act.sync"] == ["act.merged", "act.start"]


def test_events_lists_the_last_ones_oldest_first(repo: Path) -> None:
    events = emitter(initialised(repo))
    empty = soda("events", cwd=repo)
    assert empty.returncode == 0 and "no events yet" in empty.stdout
    for n in range(4):
        events.emit(f"test.n{n}", {"n": n})
    result = soda("events", "--limit", "2", "--json", cwd=repo)
    assert result.returncode == 0, result.stderr
    kinds = [json.loads(line)["kind"] for line in result.stdout.splitlines()]
    assert kinds == ["test.n2", "test.n3"]
    text = soda("events", "--kind", "test.n1", cwd=repo).stdout.splitlines()
    assert len(text) == 1 and "test.n1" in text[0] and '{"n": 1}' in text[0]


def test_run_shows_progress_and_emits_the_phase_and_agent_events(tmp_path: Path) -> None:
    root = scripted_project(tmp_path / "project")
    result = soda("run", "--once", cwd=root)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # Not a terminal: plain lines, one per model turn and per agent that finishes.
    assert "  progress: iteration 1 | orient | verifier turn 1 | 0 tokens $0.0000 | 0s" in lines
    executor = [line for line in lines if "| act | executor turn" in line]
    assert len(executor) == 5, lines
    assert any(
        line.startswith("  progress: executor answered after 5 turns | iteration 1 | act")
        for line in lines
    )
    # Progress lines come between the loop's own lines, in order.
    assert lines.index("iteration 1") < lines.index(executor[0])
    act_line = next(i for i, line in enumerate(lines) if line.startswith("act:"))
    assert lines.index(executor[-1]) < act_line

    events = soda("events", "--json", "--limit", "1000", cwd=root)
    records = [json.loads(line) for line in events.stdout.splitlines()]
    kinds = [r["kind"] for r in records if r["iteration"] == 1]
    phases = [k for k in kinds if k in {"sense.start", "orient.start", "decide.done", "act.start"}]
    assert phases == ["sense.start", "orient.start", "decide.done", "act.start"]
    turns = [r["data"] for r in records if r["kind"] == "agent.turn"]
    assert len(turns) == 10  # verifier 2, assessor 2, planner 1, executor 5
    assert set(turns[0]) == {
        "agent",
        "turn",
        "model",
        "tokens_in",
        "tokens_out",
        "cost_usd",
        "price_source",
    }
    starts = [r["data"]["agent"] for r in records if r["kind"] == "agent.start"]
    ends = [r["data"]["agent"] for r in records if r["kind"] == "agent.end"]
    assert starts == ends == ["verifier", "assessor", "planner", "executor"]


def test_run_json_keeps_progress_off_stdout(tmp_path: Path) -> None:
    root = scripted_project(tmp_path / "project")
    result = soda("run", "--once", "--json", cwd=root)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["ending"] == "continue"
    assert "progress: iteration 1 | act | executor turn 5" in result.stderr


def test_run_on_a_terminal_draws_a_live_line(tmp_path: Path) -> None:
    """Under a pseudo-terminal rich redraws one line (cursor control, no plain
    progress lines), and the loop's own lines still arrive."""
    import os
    import pty

    root = scripted_project(tmp_path / "project")
    pid, fd = pty.fork()
    if pid == 0:  # the child: soda on a terminal
        os.chdir(root)
        os.environ.update({"TERM": "xterm", "COLUMNS": "200"})
        os.execv(sys.executable, [sys.executable, "-m", "soda", "run", "--once"])
    chunks = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            data = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    _, status = os.waitpid(pid, 0)
    screen = b"".join(chunks).decode("utf-8", "replace")
    assert os.waitstatus_to_exitcode(status) == 0, screen[-2000:]
    assert "\x1b[2K" in screen  # the live line is erased and redrawn
    assert "iteration 1 | act | executor turn" in screen
    assert "progress:" not in screen
    assert "merged: " in screen


def test_every_event_kind_the_readme_lists_is_emitted() -> None:
    """README drift: a kind in the Watching soda table that no code emits."""
    import re

    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text()
    section = readme.split("## Watching soda", 1)[1].split("\n## ", 1)[0]
    table = [line for line in section.splitlines() if line.startswith("| `")]
    listed = {kind for line in table for kind in re.findall(r"`([a-z_.]+)`", line.split("|")[1])}
    assert {"agent.turn", "sense.start", "decide.done", "act.merged"} <= listed
    source = "\n".join(path.read_text() for path in (root / "soda").rglob("*.py"))
    missing = sorted(kind for kind in listed if f'"{kind}"' not in source)
    assert not missing, f"README lists events nothing emits: {missing}"
