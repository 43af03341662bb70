"""Per-iteration overhead of soda on a real repository, against plain git doing the same work.

Clones the repository (`git clone --shared`, into a temporary directory: nothing
of it lands in this repository), sets soda up there with a model that takes no
time (bench/harness.py) and `true` as the test command, and runs N iterations in
which the executor writes one file that the gate merges. Interleaved with them,
iteration by iteration (in rotating order), three floors do the same git work
with plain git (see `harness.Floors`): one full checkout; the work in a fresh
`git worktree add`; the work in kept worktrees. Every git process (soda's and
the floors') is counted by a `git` shim first on PATH; soda's long-lived gits
(`cat-file`, `update-ref --stdin`, `check-attr`, `diff-tree`: one each per
session) count once, when they start. The first iteration creates soda's
checkout pool and is left out of the medians.

Goal: soda's median iteration <= 1.5x the kept-worktree floor.

    python bench/iteration_overhead.py REPO [-n 20] [--files same|new] [--sandbox bwrap|none]

REPO is a git repository, bare or not: a clone of github.com/pallets/flask or
github.com/sympy/sympy (default: the SODA_BENCH_REPO environment variable).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from harness import (
    Floors,
    GitCalls,
    Phases,
    bench_model,
    by_subcommand,
    describe,
    git,
    loadavg,
    median,
    ms,
    prepare,
    rotated,
    short,
)

from soda.config import load
from soda.loop.run import Ending, run_iteration
from soda.loop.session import Session

GOAL = 1.5


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", nargs="?", type=Path, default=os.environ.get("SODA_BENCH_REPO"))
    parser.add_argument("-n", "--iterations", type=int, default=20)
    parser.add_argument("--files", choices=("same", "new"), default="same")
    parser.add_argument("--sandbox", choices=("bwrap", "none"), default="bwrap")
    parser.add_argument("--calls", action="store_true", help="list soda's git calls per iteration")
    args = parser.parse_args()
    if args.repo is None or not ((args.repo / "HEAD").is_file() or (args.repo / ".git").exists()):
        print("pass the path of a git repository (a clone or a bare mirror)", file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory(prefix="soda-overhead-") as tmp_name:
        tmp = Path(tmp_name)
        target = tmp / "repo"
        t0 = time.perf_counter()
        branch = prepare(args.repo, target, args.iterations, args.sandbox)
        start = git(target, "rev-parse", "HEAD")
        print(f"repository: {args.repo} ({describe(target)}, branch {branch})")
        print(f"setup {time.perf_counter() - t0:.1f}s; load before: {loadavg()}")
        floors = Floors(target, tmp, start, args.files)
        counter = GitCalls(tmp / "git-shim")
        counter.install()

        mark = counter.mark()
        session = Session.open(load(target / "soda.toml"), model=bench_model(args.files))
        print(f"Session.open: {len(counter.since(mark))} git processes")
        phases = Phases()
        session.events.subscribe(phases.listener)
        soda: list[float] = []
        split: list[dict[str, float]] = []
        soda_calls: list[list[str]] = []
        floor_times: dict[str, list[float]] = {name: [] for name in Floors.NAMES}
        floor_calls: dict[str, list[int]] = {name: [] for name in Floors.NAMES}
        lines: list[str] = []
        failed: list[str] = []

        def soda_iteration() -> None:
            phases.start()
            before = counter.mark()
            t0 = time.perf_counter()
            result = run_iteration(session, lines.append)
            end = time.perf_counter()
            soda.append(end - t0)
            split.append(phases.split(end))
            soda_calls.append(counter.since(before))
            if result.ending is not Ending.CONTINUE:
                failed.append(f"iteration ended {result.ending.name}: {result.reason}")

        def floor(name: str, n: int) -> None:
            before = counter.mark()
            floor_times[name].append(floors.run(name, n))
            floor_calls[name].append(len(counter.since(before)))

        try:
            for n in range(1, args.iterations + 1):
                steps = [soda_iteration] + [
                    lambda name=name, n=n: floor(name, n)  # type: ignore[misc]
                    for name in Floors.NAMES
                ]
                for step in rotated(steps, n):
                    step()
                if failed:
                    print("\n".join(lines[-8:]), file=sys.stderr)
                    print(failed[0], file=sys.stderr)
                    return 1
            outcomes = [
                row[0]
                for row in session.db.execute("SELECT outcome FROM iterations ORDER BY number")
            ]
        finally:
            session.finish_run("stopped", "bench finished")  # type: ignore[arg-type]
        if outcomes != ["merged"] * args.iterations:
            print(f"not every iteration merged: {outcomes}", file=sys.stderr)
            return 1

        steady = slice(1, None) if args.iterations > 1 else slice(None)
        soda_s = median(soda[steady])
        counts = [len(c) for c in soda_calls[steady]]
        print(f"load after: {loadavg()}")
        print()
        print(
            f"first iteration (creates the pool): {ms(soda[0])}, {len(soda_calls[0])} git processes"
        )
        print(
            f"soda per iteration (median of iterations 2..{args.iterations}): {ms(soda_s)}, "
            f"{median(counts):.0f} git processes"
        )
        for phase in ("sense", "orient", "act"):
            values = [s[phase] for s in split[steady] if s]
            print(f"  {phase:6} median {ms(median(values))}")
        print(f"  git processes by subcommand: {by_subcommand(soda_calls[steady])}")
        for name in Floors.NAMES:
            floor_s = median(floor_times[name][steady])
            ratio = soda_s / floor_s
            print(
                f"floor {name:8}: {ms(floor_s)}, {median(floor_calls[name]):.0f} git processes; "
                f"soda / floor = {ratio:.2f}x"
            )
        ratio = soda_s / median(floor_times["kept"][steady])
        verdict = "ok" if ratio <= GOAL else f"over by {ratio / GOAL:.2f}x"
        print(f"overhead over the kept-worktree floor: {ratio:.2f}x (goal <= {GOAL}x: {verdict})")
        # Each soda iteration against the kept floor's iteration run right beside it:
        # what the machine did in between cancels out.
        paired = [s / f for s, f in zip(soda[steady], floor_times["kept"][steady], strict=True)]
        print(
            f"  iteration by iteration (each beside its floor): median {median(paired):.2f}x, "
            f"quartiles {quantile(paired, 0.25):.2f}-{quantile(paired, 0.75):.2f}x"
        )
        if args.calls:
            for n, logged in enumerate(soda_calls, 1):
                print(f"-- iteration {n} git calls:")
                for line in logged:
                    print(f"   git {short(line)}")
        return 0


if __name__ == "__main__":
    sys.exit(main())
