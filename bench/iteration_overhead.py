"""Per-iteration overhead of soda on a real, large repository, against plain git.

Clones the repository (`git clone --shared`, into a temporary directory: nothing
of it lands in this repository), sets soda up there with the scripted provider
(the model takes no time) and `true` as the test command, and runs N iterations
in which the executor makes a one-line change that the gate merges. Each
iteration is timed, and the git processes soda starts are counted by a `git`
shim put first on PATH (it logs its arguments and execs the real git; the bench
only). The floor is plain git doing one full checkout of the same commit
(`git worktree add`, median of 3). The first iteration creates the checkout
pool and is shown apart; the goal is a median iteration <= 1.2x the floor.

    python bench/iteration_overhead.py [REPO] [-n 5] [--sandbox bwrap|none] [--calls]

REPO is a git repository, bare or not, e.g. a clone of github.com/sympy/sympy
(default: the SODA_BENCH_REPO environment variable).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from soda.cli.init import init_project
from soda.config import (
    Config,
    GateConfig,
    LoopConfig,
    ModelConfig,
    ProjectConfig,
    SandboxConfig,
    load,
)
from soda.loop.run import Ending, run_iteration
from soda.loop.session import Session

DEFAULT_REPO = Path(os.environ.get("SODA_BENCH_REPO", "sympy"))
BENCH_FILE = "SODA_BENCH.txt"
SCRIPT = "state/bench-script.json"
GOAL = 1.2


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def submit(agent: str, data: dict) -> dict:
    return {"agent": agent, "tool_calls": [{"name": "submit", "input": data}]}


def iteration_script(n: int) -> list[dict]:
    """One iteration: verify, assess (not met), plan one task, one edit, submit."""
    task = {
        "id": "a",
        "task_id": None,
        "title": f"Set the bench counter to {n}",
        "description": f"{BENCH_FILE}: counter = {n}",
        "depends_on": [],
        "risk": "low",
        "tool_hints": [],
    }
    return [
        submit(
            "verifier",
            {
                "checks": [],
                "task_updates": [],
                "learnings": [],
                "summary": "checked",
                "learning_verdicts": [],
            },
        ),
        submit(
            "assessor",
            {"spec_satisfied": False, "confidence": "high", "gaps": [], "summary": "not yet"},
        ),
        submit(
            "planner",
            {
                "actionable_work_exists": True,
                "new_tasks": [],
                "stuck_reason": None,
                "learnings": [],
                "iteration_plan": {
                    # Distinct intents: the same intent three times is a loop (STUCK).
                    "intent": f"bench iteration {n}",
                    "approach": "one line",
                    "tasks": [task],
                },
            },
        ),
        {
            "agent": "executor",
            "tool_calls": [
                {
                    "name": "edit_file",
                    "input": {
                        "path": BENCH_FILE,
                        "old": f"counter = {n - 1}\n",
                        "new": f"counter = {n}\n",
                    },
                }
            ],
        },
        submit(
            "executor",
            {
                "tasks_blocked": [],
                "task_comments": [],
                "new_subtasks": [],
                "learnings": [],
                "summary": f"counter = {n}",
            },
        ),
    ]


def git_shim(directory: Path, log: Path) -> Path:
    """A directory holding a `git` that logs its argv to `log` (NUL-terminated: commit
    messages span lines) and execs the real git."""
    real = shutil.which("git")
    if real is None:
        sys.exit("git is not on PATH")
    directory.mkdir(parents=True)
    shim = directory / "git"
    shim.write_text(
        "#!/bin/sh\n"
        f"printf '%s\\0' \"$*\" >> {shlex.quote(str(log))} 2>/dev/null\n"
        f'exec {shlex.quote(real)} "$@"\n'
    )
    shim.chmod(0o755)
    return directory


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
        if word == "rev-parse" and i + 1 < len(words):
            what = words[-1]
            if what.endswith("^{tree}"):
                return "rev-parse COMMIT^{tree}"
            return f"rev-parse {'SHA' if len(what) == 40 else what}"
        if word in ("worktree", "status"):
            return " ".join(words[i : i + 2])
        return word
    return "?"


def cpu() -> float:
    """CPU seconds used so far by this process and its waited-for children (git,
    the jail, the tests): less sensitive than wall time to a busy machine."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def floor(repo: Path, commit: str, runs: int, tmp: Path) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of plain `git worktree add`: one full checkout of `commit`."""
    times, cpus = [], []
    for n in range(runs):
        path = tmp / f"floor-{n}"
        c0, t0 = cpu(), time.perf_counter()
        git(repo, "worktree", "add", "-q", "--detach", str(path), commit)
        times.append(time.perf_counter() - t0)
        cpus.append(cpu() - c0)
        git(repo, "worktree", "remove", "--force", str(path))
    return times, cpus


def prepare(source: Path, target: Path, iterations: int, sandbox: str) -> str:
    """Clone `source` to `target` and set soda up there; returns the base branch."""
    subprocess.run(["git", "clone", "-q", "--shared", str(source), str(target)], check=True)
    branch = git(target, "symbolic-ref", "--short", "HEAD")
    config = Config(
        project=ProjectConfig(base_branch=branch, test_command="true"),
        model=ModelConfig(provider="scripted", script=SCRIPT, strong="scripted", fast="scripted"),
        loop=LoopConfig(max_iterations=iterations + 1),
        gate=GateConfig(),
        sandbox=SandboxConfig(mode=sandbox),
    )
    init_project(target, config)
    (target / BENCH_FILE).write_text("counter = 0\n")
    responses = [r for n in range(1, iterations + 1) for r in iteration_script(n)]
    (target / SCRIPT).write_text(json.dumps({"responses": responses}))
    git(target, "add", "soda.toml", "specs", BENCH_FILE)
    git(target, "commit", "-q", "-m", "soda bench setup")
    return branch


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", nargs="?", type=Path, default=DEFAULT_REPO)
    parser.add_argument("-n", "--iterations", type=int, default=5)
    parser.add_argument("--floor-runs", type=int, default=3)
    parser.add_argument("--sandbox", choices=("bwrap", "none"), default="bwrap")
    parser.add_argument("--calls", action="store_true", help="list git calls per iteration")
    args = parser.parse_args()
    if not (args.repo / "HEAD").is_file() and not (args.repo / ".git").exists():
        print(
            f"no git repository at {args.repo}: pass the path of a large repository "
            "(a clone or a bare mirror), e.g. of github.com/sympy/sympy",
            file=sys.stderr,
        )
        return 2

    with tempfile.TemporaryDirectory(prefix="soda-overhead-") as tmp_name:
        tmp = Path(tmp_name)
        target = tmp / "repo"
        t0 = time.perf_counter()
        branch = prepare(args.repo, target, args.iterations, args.sandbox)
        commit = git(target, "rev-parse", "HEAD")
        files = len(git(target, "ls-files").splitlines())
        commits = git(target, "rev-list", "--count", "HEAD")
        print(
            f"repository: {args.repo} ({files:,} files, {int(commits):,} commits, "
            f"branch {branch}); setup {time.perf_counter() - t0:.1f}s"
        )
        floors, floor_cpus = floor(target, commit, args.floor_runs, tmp)
        floor_s, floor_cpu = statistics.median(floors), statistics.median(floor_cpus)
        print(
            f"floor: git worktree add, median {floor_s:.2f}s of {fmt(floors)} "
            f"(cpu {floor_cpu:.2f}s)"
        )

        log = tmp / "git-calls.log"
        log.touch()
        shims = git_shim(tmp / "shim", log)
        os.environ["PATH"] = f"{shims}{os.pathsep}{os.environ.get('PATH', '')}"

        def calls() -> list[str]:
            return log.read_text().split("\0")[:-1]

        t0 = time.perf_counter()
        session = Session.open(load(target / "soda.toml"))
        opened = time.perf_counter() - t0
        open_calls = len(calls())
        print(f"Session.open: {opened:.2f}s, {open_calls} git processes")
        times: list[float] = []
        cpus: list[float] = []
        counts: list[int] = []
        per_iteration: list[list[str]] = []
        lines: list[str] = []
        try:
            for _ in range(args.iterations):
                before = len(calls())
                c0, t0 = cpu(), time.perf_counter()
                result = run_iteration(session, lines.append)
                times.append(time.perf_counter() - t0)
                cpus.append(cpu() - c0)
                logged = calls()[before:]
                counts.append(len(logged))
                per_iteration.append(logged)
                if result.ending is not Ending.CONTINUE:
                    print("\n".join(lines[-8:]), file=sys.stderr)
                    print(f"iteration ended {result.ending.name}: {result.reason}", file=sys.stderr)
                    return 1
            outcomes = [
                row[0]
                for row in session.db.execute("SELECT outcome FROM iterations ORDER BY number")
            ]
        finally:
            before = len(calls())
            t0 = time.perf_counter()
            session.finish_run("stopped", "bench finished")
            closed = time.perf_counter() - t0
            close_calls = len(calls()) - before
        if outcomes != ["merged"] * args.iterations:
            print(f"not every iteration merged: {outcomes}", file=sys.stderr)
            return 1
        print(f"finish_run (pool removed): {closed:.2f}s, {close_calls} git processes")

        for n, (seconds, used, count) in enumerate(zip(times, cpus, counts, strict=True), 1):
            print(f"iteration {n}: {seconds:.2f}s (cpu {used:.2f}s), {count} git processes")
        if args.calls:
            for n, logged in enumerate(per_iteration, 1):
                print(f"-- iteration {n} git calls:")
                for line in logged:
                    print(f"   git {_short(line)}")
        steady = times[1:] or times
        median = statistics.median(steady)
        ratio = median / floor_s
        print()
        print(
            f"first iteration (creates the pool): {times[0]:.2f}s (cpu {cpus[0]:.2f}s), "
            f"{counts[0]} git processes"
        )
        print(
            f"per iteration (median of iterations 2..{args.iterations}): {median:.2f}s "
            f"(cpu {statistics.median(cpus[1:] or cpus):.2f}s), "
            f"{statistics.median(counts[1:] or counts):.0f} git processes"
        )
        print(f"floor (one full checkout): {floor_s:.2f}s (cpu {floor_cpu:.2f}s)")
        verdict = "ok" if ratio <= GOAL else "over"
        print(f"ratio: {ratio:.2f}x (goal <= {GOAL}x: {verdict})")
        by_kind = collections.Counter(
            subcommand(line) for logged in per_iteration[1:] for line in logged
        )
        if by_kind:
            steady_n = max(1, len(per_iteration) - 1)
            shown = ", ".join(f"{k} {v / steady_n:g}" for k, v in by_kind.most_common())
            print(f"git per iteration by subcommand: {shown}")
        return 0


def _short(line: str) -> str:
    """A logged argv without soda's `-c` options, on one line."""
    words = line.replace("\n", " ").split(" ")
    kept = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word == "-c":
            skip = True
            continue
        kept.append(word)
    return " ".join(kept)[:200]


def fmt(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


if __name__ == "__main__":
    sys.exit(main())
