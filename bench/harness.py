"""Shared by the git-cost benches (iteration_overhead.py, long_run.py, sense_speed.py).

- `GitCalls`: a `git` shim first on PATH that logs every git process started
  (by soda, GitPython's persistent helpers included, and by the floors) and
  execs the real git: counts are processes, not function calls.
- `prepare`: a `git clone --shared` of a repository (into a temporary
  directory: nothing of it lands in this repository) set up for soda with a
  behavioural model that takes no time (`bench_model`) and `true` as the test
  command. Each iteration writes one file, which the gate merges.
- `Phases`: per-iteration phase times, read from soda's own events.
- `Floors`: plain git doing the same work (one file written, committed and merged
  `--no-ff` into a milestone branch), three ways.
"""

from __future__ import annotations

import collections
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from soda.cli.init import init_project
from soda.config import Config, GateConfig, LoopConfig, ModelConfig, ProjectConfig, SandboxConfig
from soda.llm.base import ModelRequest
from soda.llm.function import FunctionModel, Reply, call, first_turn, submit

SCRIPT = "state/bench-script.json"
IDENTITY = ("-c", "user.name=bench", "-c", "user.email=bench@example.invalid")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *IDENTITY, *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def loadavg() -> str:
    """The machine's load (1, 5, 15 minutes): the benches run on a shared machine."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def median(values: Iterable[float]) -> float:
    listed = list(values)
    return statistics.median(listed) if listed else float("nan")


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


# --- counting git processes ---------------------------------------------------------


class GitCalls:
    """A directory holding a `git` that logs its argv (NUL-terminated: commit
    messages span lines) and execs the real git; put first on PATH by `install`."""

    def __init__(self, directory: Path) -> None:
        real = shutil.which("git")
        if real is None:
            sys.exit("git is not on PATH")
        self.log = directory / "git-calls.log"
        shim_dir = directory / "shim"
        shim_dir.mkdir(parents=True)
        shim = shim_dir / "git"
        shim.write_text(
            "#!/bin/sh\n"
            f"printf '%s\\0' \"$*\" >> {shlex.quote(str(self.log))} 2>/dev/null\n"
            f'exec {shlex.quote(real)} "$@"\n'
        )
        shim.chmod(0o755)
        self.log.touch()
        self.shim_dir = shim_dir

    def install(self) -> None:
        os.environ["PATH"] = f"{self.shim_dir}{os.pathsep}{os.environ.get('PATH', '')}"

    def calls(self) -> list[str]:
        return self.log.read_text(errors="replace").split("\0")[:-1]

    def mark(self) -> int:
        return len(self.calls())

    def since(self, mark: int) -> list[str]:
        return self.calls()[mark:]


def subcommand(line: str) -> str:
    """The git subcommand of a logged argv (global options skipped)."""
    words = line.split()
    i = 0
    while i < len(words):
        word = words[i]
        if word in ("-c", "-C", "--git-dir", "--work-tree"):
            i += 2
            continue
        if word.startswith("-"):
            i += 1
            continue
        if word == "rev-parse":
            return "rev-parse"
        if word in ("worktree", "status", "cat-file"):
            return " ".join(words[i : i + 2])
        return word
    return "?"


def by_subcommand(calls: list[list[str]]) -> str:
    """Mean git processes per iteration by subcommand, most frequent first."""
    kinds = collections.Counter(subcommand(line) for logged in calls for line in logged)
    n = max(1, len(calls))
    return ", ".join(f"{kind} {count / n:g}" for kind, count in kinds.most_common())


def short(line: str) -> str:
    """A logged argv without `-c` options, on one line."""
    words = line.replace("\n", " ").split(" ")
    kept, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word == "-c":
            skip = True
        else:
            kept.append(word)
    return " ".join(kept)[:200]


# --- soda on a clone ----------------------------------------------------------------


def write_path(n: int, files: str) -> str:
    """The file iteration `n` writes: one file again and again (`same`), or a new
    file each time (`new`: the milestone's diff grows with the history)."""
    return "SODA_BENCH.txt" if files == "same" else f"soda-bench/f{n:05d}.txt"


def bench_model(files: str) -> FunctionModel:
    """The zero-latency model: the verifier and the assessor answer at once (spec
    not met), the planner plans one task with an intent of its own (the same
    intent three times would be a loop), the executor writes that task's file
    and submits. The iteration count lives here, not in a script file."""
    count = {"n": 0}

    def planner(request: ModelRequest) -> Reply:
        count["n"] += 1
        n = count["n"]
        task = {
            "id": "a",
            "task_id": None,
            "title": f"Bench step {n}",
            "description": f"write {write_path(n, files)}",
            "depends_on": [],
            "risk": "low",
            "tool_hints": [],
        }
        return submit(
            {
                "actionable_work_exists": True,
                "new_tasks": [],
                "stuck_reason": None,
                "learnings": [],
                "iteration_plan": {
                    "intent": f"bench iteration {n}",
                    "approach": "one file",
                    "tasks": [task],
                },
            }
        )

    def executor(request: ModelRequest) -> Reply:
        n = count["n"]
        if first_turn(request):
            return call("write_file", path=write_path(n, files), content=f"counter = {n}\n")
        return submit(
            {
                "tasks_blocked": [],
                "task_comments": [],
                "new_subtasks": [],
                "learnings": [],
                "summary": f"counter = {n}",
            }
        )

    verified = {
        "checks": [],
        "task_updates": [],
        "learnings": [],
        "learning_verdicts": [],
        "summary": "checked",
    }
    not_met = {"spec_satisfied": False, "confidence": "high", "gaps": [], "summary": "not yet"}
    return FunctionModel.by_agent(
        {
            "verifier": lambda request: submit(verified),
            "assessor": lambda request: submit(not_met),
            "planner": planner,
            "executor": executor,
        }
    )


def prepare(source: Path, target: Path, iterations: int, sandbox: str) -> str:
    """Clone `source` to `target` and set soda up there; returns the base branch."""
    subprocess.run(["git", "clone", "-q", "--shared", str(source), str(target)], check=True)
    branch = git(target, "symbolic-ref", "--short", "HEAD")
    config = Config(
        project=ProjectConfig(base_branch=branch, test_command="true"),
        # The model is `bench_model`, handed to Session.open; the config names an
        # empty script so that it validates.
        model=ModelConfig(provider="scripted", script=SCRIPT, strong="scripted", fast="scripted"),
        loop=LoopConfig(max_iterations=iterations + 10),
        gate=GateConfig(),
        sandbox=SandboxConfig(mode=sandbox),
    )
    init_project(target, config)
    (target / SCRIPT).write_text('{"responses": []}')
    git(target, "add", "soda.toml", "specs")
    git(target, "commit", "-q", "-m", "soda bench setup")
    settle_index(target)
    return branch


def settle_index(repo: Path) -> None:
    """Refresh the checkout's index once its files are more than a second old.
    Files written in the same second as the index are "racily clean": git must
    read them again at every `status`, and soda's status never writes the index
    back (it takes no lock in a person's checkout). A person's own git commands
    keep their index fresh; a fresh clone's is not, which made SENSE's times
    swing by 100 ms on sympy from one run to the next."""
    time.sleep(1.1)  # setup only: the racy window is the index's second
    git(repo, "update-index", "-q", "--refresh")


def describe(repo: Path) -> str:
    files = len(git(repo, "ls-files").splitlines())
    commits = int(git(repo, "rev-list", "--count", "HEAD"))
    return f"{files:,} files, {commits:,} commits"


class Phases:
    """Phase times of the iteration running now, from soda's events: SENSE from
    `sense.start` to `orient.start`, ORIENT (its non-model part, with DECIDE) to
    `decide.done`, ACT from `act.start` to the iteration's end."""

    MARKS = ("sense.start", "orient.start", "decide.done", "act.start")

    def __init__(self) -> None:
        self.seen: dict[str, float] = {}

    def listener(self, kind: str, data: dict[str, Any]) -> None:
        if kind in self.MARKS:
            self.seen[kind] = time.perf_counter()

    def start(self) -> None:
        self.seen = {}

    def split(self, end: float) -> dict[str, float]:
        s = self.seen
        if not all(mark in s for mark in self.MARKS):
            return {}
        return {
            "sense": s["orient.start"] - s["sense.start"],
            "orient": s["decide.done"] - s["orient.start"],
            "act": end - s["act.start"],
        }


# --- the floors -----------------------------------------------------------------------


class Floors:
    """Plain git doing an iteration's git work: write one file, commit it, merge it
    `--no-ff` into a milestone branch. Each floor has a milestone branch of its own
    in the same clone (forked where soda's is), so all grow alike.

    checkout   one full checkout of the tip (`git worktree add`): what a worktree
               per iteration costs before any work (the old bench's floor)
    worktree   the work in a fresh `git worktree add` per iteration, merged in a
               kept milestone worktree; the worktree and its branch removed after
    kept       the work in kept worktrees: `checkout -B` of the milestone in a
               kept work tree, add, commit, `merge --no-ff` in a kept milestone
               worktree (the honest floor for what soda does)
    """

    NAMES = ("checkout", "worktree", "kept")

    def __init__(self, repo: Path, tmp: Path, start: str, files: str) -> None:
        self.repo, self.tmp, self.files = repo, tmp, files
        for name in ("worktree", "kept"):
            git(repo, "branch", f"floor-{name}", start)
            git(repo, "worktree", "add", "-q", str(tmp / f"floor-{name}-ms"), f"floor-{name}")
        git(repo, "worktree", "add", "-q", "--detach", str(tmp / "floor-kept-work"), start)

    def run(self, name: str, n: int) -> float:
        """One iteration of floor `name`; its wall seconds."""
        return {"checkout": self.checkout, "worktree": self.worktree, "kept": self.kept}[name](n)

    def checkout(self, n: int) -> float:
        path = self.tmp / "floor-checkout"
        t0 = time.perf_counter()
        git(self.repo, "worktree", "add", "-q", "--detach", str(path), "floor-kept")
        seconds = time.perf_counter() - t0
        git(self.repo, "worktree", "remove", "--force", str(path))
        return seconds

    def _change(self, work: Path, ms: Path, branch: str, n: int) -> None:
        target = work / write_path(n, self.files)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"counter = {n}\n")
        git(work, "add", "-A")
        git(work, "commit", "-q", "-m", f"floor step {n}")
        git(ms, "merge", "--no-ff", "-q", "-m", f"merge floor step {n}", branch)

    def worktree(self, n: int) -> float:
        work, branch = self.tmp / f"floor-wt-{n}", f"floor-wt-{n}"
        t0 = time.perf_counter()
        git(self.repo, "worktree", "add", "-q", "-b", branch, str(work), "floor-worktree")
        self._change(work, self.tmp / "floor-worktree-ms", branch, n)
        git(self.repo, "worktree", "remove", "--force", str(work))
        git(self.repo, "branch", "-D", branch)
        return time.perf_counter() - t0

    def kept(self, n: int) -> float:
        work = self.tmp / "floor-kept-work"
        t0 = time.perf_counter()
        git(work, "checkout", "-q", "--force", "-B", "floor-kept-work", "floor-kept")
        self._change(work, self.tmp / "floor-kept-ms", "floor-kept-work", n)
        return time.perf_counter() - t0


def rotated(items: list[Callable[[], None]], n: int) -> list[Callable[[], None]]:
    """`items` started at position n: each runs first, second, ... in turn, so no
    one always pays for a cold cache or profits from a warm one."""
    k = n % len(items)
    return items[k:] + items[:k]
