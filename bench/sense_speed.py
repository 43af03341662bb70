"""How long SENSE takes on a large, old repository and a busy database.

Builds (with `git fast-import`, in a temporary directory) a repository with a long
history and a milestone branch with many commits, plus a database with many
tasks, comments, iterations, model calls and human inputs. Then, as in a run,
each timed `sense()` follows a new commit on the milestone (made outside the
timing): SENSE advances its stored digest by that commit (soda.repo.digest).
The first SENSE, which builds the digest, is shown apart.

Goals: a median <= 30 ms; and SENSE at iteration 10,000 within 10% of iteration
10 (`--sizes 10 10000`: the milestone, the tasks, the iterations and the calls
all scale with the size).

    python bench/sense_speed.py [--history 20000] [--sizes 500] [--runs 30]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from git import Repo
from harness import GitCalls, loadavg, settle_index
from sqlite_utils import Database

from soda.config import Config
from soda.loop.sense import SenseInput, sense
from soda.store import open_db
from soda.store.db import now
from soda.trace import SqliteTracker

GOAL_MS = 30.0
GOAL_RATIO = 1.10
STAMP = 1_700_000_000


def commit_lines(ref: str, mark: int | None, parent: str | None, n: int, files: int) -> list[str]:
    message = f"commit {n}"
    content = f"line {n}\n"
    lines = [f"commit {ref}"]
    if mark is not None:
        lines.append(f"mark :{mark}")
    lines += [
        f"committer bench <bench@example.invalid> {STAMP + n} +0000",
        f"data {len(message)}",
        message,
    ]
    if parent is not None:
        lines.append(f"from {parent}")
    return [*lines, f"M 644 inline src/f{n % files}.py", f"data {len(content)}", content]


def fast_import(repo: Path, history: int, milestone: int, files: int) -> str:
    """main gets `history` commits; soda/spec forks from it and gets `milestone` more."""
    lines: list[str] = []
    for n in range(1, history + 1):
        lines += commit_lines("refs/heads/main", n, f":{n - 1}" if n > 1 else None, n, files)
    for m in range(1, milestone + 1):
        mark = history + m
        lines += commit_lines("refs/heads/soda/spec", mark, f":{mark - 1}", mark, files)
    data = ("\n".join(lines) + "\n").encode()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, input=data, check=True)
    subprocess.run(["git", "checkout", "-q", "main"], cwd=repo, check=True)
    settle_index(repo)  # else SENSE's `git status` reads every racily clean file
    return subprocess.run(
        ["git", "rev-parse", "main"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()


def advance(repo: Path, n: int, files: int) -> None:
    """One more commit on the milestone (what a merge does to it, for SENSE)."""
    lines = commit_lines("refs/heads/soda/spec", None, "refs/heads/soda/spec^0", n, files)
    data = ("\n".join(lines) + "\n").encode()
    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, input=data, check=True)


def fill_db(path: Path, tasks: int, iterations: int) -> tuple[Database, int]:
    db = open_db(path)
    with db.conn:
        run_id = int(
            db.execute(
                "INSERT INTO runs (started_at, spec_path, milestone, milestone_branch,"
                " base_branch, status) VALUES (?, 's', 'spec', 'soda/spec', 'main', 'running')",
                [now()],
            ).lastrowid
            or 0
        )
    root = SqliteTracker(db, "spec").create("Spec")
    stamp = now()
    with db.conn:  # a third of the tasks closed, each with a comment
        first = root.id + 1
        db.conn.executemany(
            "INSERT INTO tasks (id, milestone, parent_id, title, status, status_reason,"
            " created_at, updated_at, closed_at) VALUES (?, 'spec', ?, ?, ?, ?, ?, ?, ?)",
            [
                (first + n, root.id, f"task {n}", "closed" if n % 3 == 0 else "open",
                 "done" if n % 3 == 0 else None, stamp, stamp, stamp if n % 3 == 0 else None)
                for n in range(tasks)
            ],
        )  # fmt: skip
        db.conn.executemany(
            "INSERT INTO task_comments (task_id, author, body, created_at)"
            " VALUES (?, 'executor', ?, ?)",
            [(first + n, f"note {n}", stamp) for n in range(tasks)],
        )
        db.conn.executemany(
            "INSERT INTO iterations (run_id, number, started_at, intent, outcome)"
            " VALUES (?, ?, ?, ?, 'merged')",
            [(run_id, n, stamp, f"intent {n}") for n in range(1, iterations + 1)],
        )
        db.conn.executemany(
            "INSERT INTO agent_calls (run_id, agent, provider, model, turn, started_at,"
            " latency_ms, cost_usd) VALUES (?, 'planner', 'bench', 'bench', 1, ?, 0, 0.01)",
            [(run_id, stamp) for _ in range(iterations * 5)],
        )
        db.conn.executemany(
            "INSERT INTO human_inputs (kind, payload_json, source, status, received_at,"
            " applied_iteration) VALUES ('correction', ?, 'bench', 'applied', ?, ?)",
            [
                (json.dumps({"kind": "correction", "text": f"t{n}"}), stamp, n)
                for n in range(iterations)
            ],
        )
    return db, run_id


def measure(args: argparse.Namespace, size: int, tmp: Path, counter: GitCalls) -> list[float]:
    repo = tmp / f"repo-{size}"
    started = time.perf_counter()
    base = fast_import(repo, args.history, size, args.files)
    db, run_id = fill_db(tmp / f"soda-{size}.db", size, size)
    print(
        f"size {size}: setup {time.perf_counter() - started:.1f}s ({args.history} + {size} "
        f"commits, {size} tasks, {size} iterations, {size * 5} model calls)"
    )
    git_repo = Repo(repo)
    inp = SenseInput(
        repo, "soda/spec", base, "spec", run_id, size + 1, 1, Config(), db, repo=git_repo
    )
    t0 = time.perf_counter()
    sense(inp)
    print(f"  first sense() (builds the digest): {(time.perf_counter() - t0) * 1000:.1f} ms")
    timings, calls = [], []
    size_bytes = 0
    for n in range(args.runs):
        advance(repo, args.history + size + n + 1, args.files)
        mark = counter.mark()
        t0 = time.perf_counter()
        claims = sense(inp)
        timings.append((time.perf_counter() - t0) * 1000)
        calls.append(len(counter.since(mark)))
        size_bytes = len(claims.model_dump_json())
    timings.sort()
    p95 = timings[min(len(timings) - 1, int(len(timings) * 0.95))]
    median = statistics.median(timings)
    verdict = "ok" if median <= GOAL_MS else f"over by {median / GOAL_MS:.2f}x"
    print(
        f"  sense() after each new commit: median {median:.1f} ms, p95 {p95:.1f} ms, "
        f"min {timings[0]:.1f} ms over {args.runs} runs; {statistics.median(calls):.0f} git "
        f"processes; claims {size_bytes:,} bytes (goal <= {GOAL_MS:.0f} ms: {verdict})"
    )
    git_repo.close()
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=int, default=20000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[500])
    parser.add_argument("--files", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    print(f"load before: {loadavg()}")
    with tempfile.TemporaryDirectory(prefix="soda-bench-") as tmp_name:
        tmp = Path(tmp_name)
        counter = GitCalls(tmp / "git-shim")
        counter.install()
        medians = [statistics.median(measure(args, size, tmp, counter)) for size in args.sizes]
    print(f"load after: {loadavg()}")
    if len(medians) > 1:
        ratio = medians[-1] / medians[0]
        verdict = "ok" if ratio <= GOAL_RATIO else f"over by {ratio / GOAL_RATIO:.2f}x"
        print(
            f"size {args.sizes[-1]} vs size {args.sizes[0]}: {medians[-1]:.1f} / "
            f"{medians[0]:.1f} ms = {ratio:.2f}x (goal <= {GOAL_RATIO:.2f}x: {verdict})"
        )


if __name__ == "__main__":
    sys.exit(main())
