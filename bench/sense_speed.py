"""How long SENSE takes on a large, old repository and a busy database.

Builds (with `git fast-import`, in a temporary directory) a repository with a long
history and a milestone branch with many commits, plus a database with many
tasks, comments, iterations and human inputs, then times `sense()`.
Target: tens of milliseconds, independent of the repository's age.

    python bench/sense_speed.py [--history 20000] [--milestone 500] [--runs 20]
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

from soda.config import Config
from soda.loop.sense import SenseInput, sense
from soda.store import open_db
from soda.store.db import now
from soda.trace import SqliteTracker


def fast_import(repo: Path, history: int, milestone: int, files: int) -> str:
    """main gets `history` commits; soda/spec forks from it and gets `milestone` more."""
    lines: list[str] = []
    stamp = 1_700_000_000

    def commit(ref: str, mark: int, parent: int | None, n: int) -> None:
        message = f"commit {n}"
        content = f"line {n}\n"
        lines.extend(
            [
                f"commit {ref}",
                f"mark :{mark}",
                f"committer bench <bench@example.invalid> {stamp + n} +0000",
                f"data {len(message)}",
                message,
            ]
        )
        if parent is not None:
            lines.append(f"from :{parent}")
        lines.extend([f"M 644 inline src/f{n % files}.py", f"data {len(content)}", content])

    for n in range(1, history + 1):
        commit("refs/heads/main", n, n - 1 if n > 1 else None, n)
    for m in range(1, milestone + 1):
        mark = history + m
        commit("refs/heads/soda/spec", mark, mark - 1, mark)
    data = ("\n".join(lines) + "\n").encode()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, input=data, check=True)
    subprocess.run(["git", "checkout", "-q", "main"], cwd=repo, check=True)
    return subprocess.run(
        ["git", "rev-parse", "main"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()


def fill_db(path: Path, tasks: int, iterations: int) -> tuple[object, int]:
    db = open_db(path)
    with db.conn:
        run_id = (
            db["runs"]
            .insert(
                {
                    "started_at": now(),
                    "spec_path": "s",
                    "milestone": "spec",
                    "milestone_branch": "soda/spec",
                    "base_branch": "main",
                    "status": "running",
                }
            )
            .last_pk
        )
    tracker = SqliteTracker(db, "spec")
    root = tracker.create("Spec")
    for n in range(tasks):
        task = tracker.create(f"task {n}", parent_id=root.id)
        tracker.comment(task.id, "executor", f"note {n}")
        if n % 3 == 0:
            tracker.close(task.id, "done")
    with db.conn:
        db["iterations"].insert_all(
            {
                "run_id": run_id,
                "number": n,
                "started_at": now(),
                "intent": f"intent {n}",
                "outcome": "merged",
            }
            for n in range(1, iterations + 1)
        )
        db["human_inputs"].insert_all(
            {
                "kind": "correction",
                "payload_json": json.dumps({"kind": "correction", "text": f"t{n}"}),
                "source": "bench",
                "status": "applied",
                "received_at": now(),
            }
            for n in range(iterations)
        )
    return db, run_id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=int, default=20000)
    parser.add_argument("--milestone", type=int, default=500)
    parser.add_argument("--files", type=int, default=3000)
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="soda-bench-") as tmp:
        repo = Path(tmp) / "repo"
        started = time.perf_counter()
        base = fast_import(repo, args.history, args.milestone, args.files)
        db, run_id = fill_db(Path(tmp) / "soda.db", args.tasks, args.iterations)
        print(
            f"setup: {time.perf_counter() - started:.1f}s "
            f"({args.history} + {args.milestone} commits, {args.tasks} tasks, "
            f"{args.iterations} iterations)"
        )
        inp = SenseInput(
            repo, "soda/spec", base, "spec", run_id, args.iterations + 1, 1, Config(), db
        )
        timings = []
        size = 0
        for _ in range(args.runs):
            t0 = time.perf_counter()
            claims = sense(inp)
            timings.append((time.perf_counter() - t0) * 1000)
            size = len(claims.model_dump_json())
        timings.sort()
        p95 = timings[min(len(timings) - 1, int(len(timings) * 0.95))]
        print(
            f"sense(): median {statistics.median(timings):.1f} ms, p95 {p95:.1f} ms, "
            f"min {timings[0]:.1f} ms over {args.runs} runs; claims {size:,} bytes"
        )


if __name__ == "__main__":
    sys.exit(main())
