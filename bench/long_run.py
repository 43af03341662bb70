"""Does an iteration cost the same at iteration 1,000 as at iteration 10?

Runs N iterations (default 1,000) of soda on a clone of a repository (default:
a small repository made here) with a model that takes no time and `true` as
the test command (bench/harness.py); each iteration writes a new file that the
gate merges, so the milestone's history and diff grow as in a long run. Prints,
per block of 100 iterations, the median iteration time, the SENSE, ORIENT and
ACT medians and the git processes, then the last block against the first.

Goal: the last 100 iterations within 1.15x of the first 100.

On a shared machine the load changes over a long run, and with it every
timing: the same iteration took 120 ms in one block and 36 ms in another
while other work came and went. So, interleaved with soda iteration by
iteration, plain git does a fixed amount of work (`harness.Floors` "kept", one
file rewritten in kept worktrees: its cost does not grow with the run), and
each block also shows soda's iterations over that reference: a growth of soda's
own shows there whatever the machine did meanwhile (`--no-reference` skips it).
And the CPU time an iteration used (soda's process and the git and jail
processes it waited for) counts work, not waiting for a busy machine's cores.

    python bench/long_run.py [REPO] [-n 1000] [--block 100] [--files new|same] [--explain]

`--explain` then traces the SQL of one more iteration and prints the query plan
of every statement SQLite answers by scanning a table (a cost that grows with
the history).
"""

from __future__ import annotations

import argparse
import collections
import re
import resource
import sys
import tempfile
import time
from pathlib import Path

from harness import (
    Floors,
    GitCalls,
    Phases,
    bench_model,
    describe,
    git,
    loadavg,
    median,
    ms,
    prepare,
)

from soda.config import load
from soda.loop.run import Ending, run_iteration
from soda.loop.session import Session

GOAL = 1.15


def small_repository(path: Path) -> Path:
    """A repository of 200 files in 20 directories, with 50 commits."""
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    for n in range(50):
        for f in range(4):
            target = path / f"pkg{(n * 4 + f) % 20}" / f"m{n * 4 + f}.py"
            target.parent.mkdir(exist_ok=True)
            target.write_text(f"value = {n}\n")
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", f"commit {n}")
    return path


def explain(session: Session, lines: list[str], shown: int = 12) -> None:
    """One more iteration with its SQL traced. Each read is run again alone with
    SQLite's progress handler counting virtual-machine steps: a statement whose
    count grows with the history reads rows the history adds. The costliest are
    printed, with their query plans."""
    seen: collections.Counter[str] = collections.Counter()
    session.db.conn.set_trace_callback(lambda sql: seen.update([sql]))
    try:
        run_iteration(session, lines.append)
    finally:
        session.db.conn.set_trace_callback(None)
    print(f"\nSQL of one iteration: {sum(seen.values())} statements, {len(seen)} distinct")
    costs = []
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    conn = session.db.conn
    for sql, times in seen.items():
        if not re.match(r"\s*select", sql, re.IGNORECASE) or "sqlite_master" in sql:
            continue
        steps[0] = 0
        conn.set_progress_handler(count, 100)
        try:
            conn.execute(sql).fetchall()
        except Exception:  # a statement that cannot run alone
            continue
        finally:
            conn.set_progress_handler(None, 100)
        costs.append((steps[0] * 100 * times, times, sql))
    costs.sort(reverse=True)
    print(f"the {shown} costliest reads (VM steps x times per iteration):")
    for cost, times, sql in costs[:shown]:
        print(f"  {cost:>9,} x{times}: {' '.join(sql.split())[:150]}")
        for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}").fetchall():
            print(f"      {row[-1]}")
    print(f"all reads: {sum(c[0] for c in costs):,} VM steps")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", nargs="?", type=Path)
    parser.add_argument("-n", "--iterations", type=int, default=1000)
    parser.add_argument("--block", type=int, default=100)
    parser.add_argument("--files", choices=("same", "new"), default="new")
    parser.add_argument("--sandbox", choices=("bwrap", "none"), default="bwrap")
    parser.add_argument("--explain", action="store_true")
    parser.add_argument(
        "--no-reference", action="store_true", help="no interleaved plain-git reference"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="soda-long-") as tmp_name:
        tmp = Path(tmp_name)
        source = args.repo or small_repository(tmp / "source")
        target = tmp / "repo"
        prepare(source, target, args.iterations + 1, args.sandbox)
        print(f"repository: {args.repo or 'a small one made here'} ({describe(target)})")
        print(f"load before: {loadavg()}")
        reference = None
        if not args.no_reference:
            reference = Floors(target, tmp, git(target, "rev-parse", "HEAD"), "same")
        counter = GitCalls(tmp / "git-shim")
        counter.install()
        session = Session.open(load(target / "soda.toml"), model=bench_model(args.files))
        phases = Phases()
        session.events.subscribe(phases.listener)
        times: list[float] = []
        cpu: list[float] = []
        floors: list[float] = []
        split: list[dict[str, float]] = []
        calls: list[int] = []
        lines: list[str] = []
        started = time.perf_counter()
        try:
            for n in range(1, args.iterations + 1):
                phases.start()
                mark = counter.mark()
                c0 = cpu_seconds()
                t0 = time.perf_counter()
                result = run_iteration(session, lines.append)
                end = time.perf_counter()
                times.append(end - t0)
                cpu.append(cpu_seconds() - c0)
                split.append(phases.split(end))
                calls.append(len(counter.since(mark)))
                if reference is not None:
                    floors.append(reference.run("kept", n))
                if result.ending is not Ending.CONTINUE:
                    print("\n".join(lines[-8:]), file=sys.stderr)
                    print(f"iteration {n} ended {result.ending.name}: {result.reason}")
                    return 1
                if n % args.block == 0:
                    report_block(n, args.block, times, cpu, split, calls, floors)
            print(f"{args.iterations} iterations in {time.perf_counter() - started:.0f}s")
            print(f"load after: {loadavg()}")
            first = median(times[: args.block])
            last = median(times[-args.block :])
            ratio = last / first
            verdict = "ok" if ratio <= GOAL else f"over by {ratio / GOAL:.2f}x"
            print(
                f"last {args.block} vs first {args.block}: {ms(last)} / {ms(first)} = "
                f"{ratio:.2f}x (goal <= {GOAL}x: {verdict})"
            )
            for phase in ("sense", "orient", "act"):
                head = median(s[phase] for s in split[: args.block] if s)
                tail = median(s[phase] for s in split[-args.block :] if s)
                print(f"  {phase:6} {ms(tail)} / {ms(head)} = {tail / head:.2f}x")
            head, tail = median(cpu[: args.block]), median(cpu[-args.block :])
            print(f"  CPU time of an iteration: {ms(tail)} / {ms(head)} = {tail / head:.2f}x")
            if floors:
                rel = [t / f for t, f in zip(times, floors, strict=True)]
                head, tail = median(rel[: args.block]), median(rel[-args.block :])
                print(
                    f"  over the plain-git reference: {tail:.2f} / {head:.2f} = {tail / head:.2f}x"
                    f" (reference {ms(median(floors[-args.block :]))} / "
                    f"{ms(median(floors[: args.block]))}: the machine's own change)"
                )
            if args.explain:
                explain(session, lines)
        finally:
            session.finish_run("stopped", "bench finished")  # type: ignore[arg-type]
        return 0


def cpu_seconds() -> float:
    """CPU time used so far by this process and the children it waited for."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def report_block(
    n: int,
    block: int,
    times: list[float],
    cpu: list[float],
    split: list[dict[str, float]],
    calls: list[int],
    floors: list[float],
) -> None:
    part = slice(n - block, n)
    phases = {
        phase: median(s[phase] for s in split[part] if s) for phase in ("sense", "orient", "act")
    }
    reference = ""
    if floors:
        rel = [t / f for t, f in zip(times[part], floors[part], strict=True)]
        reference = f"  reference {ms(median(floors[part])):>8}  soda/ref {median(rel):.2f}"
    print(
        f"iterations {n - block + 1:>5}-{n:<5} iteration {ms(median(times[part])):>9}  "
        + f"cpu {ms(median(cpu[part])):>8}  "
        + "  ".join(f"{phase} {ms(value):>8}" for phase, value in phases.items())
        + f"  git {median(calls[part]):.0f}"
        + reference,
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
