"""How fast the web dashboard answers, on a history of N iterations.

Runs the demo (two iterations, one merge), then grows its history to N
iterations by recording copies of the demo's first iteration (its claims,
orientation, plan, act record and 30 events each) through the store, and serves
it with `soda web`. Times each page (median and p95 of 20 requests over real
HTTP on 127.0.0.1) and the live stream: from an event written to the database
to its arrival on an open `/stream` connection (median and p95 of 20).
Goals: every page under 100 ms median at 200 iterations; an event on the
stream within 0.3 s.

    python bench/web_pages.py [-n 200]
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from soda.events import Events
from soda.store import history, runs
from soda.store.db import open_db
from soda.store.runs import IterationRef

KEEP = (
    "claims_json",
    "orient_json",
    "act_json",
    "decision",
    "decision_reason",
    "intent",
    "outcome",
    "merged_commit",
    "duration_s",
    "phase",
    "report_json",
)
PAGES = ("/", "/history", "/iteration/1", "/tasks", "/events", "/events?kind=act")


def grow(root: Path, count: int) -> None:
    """Record copies of iteration 1 until there are `count` iterations."""
    db = open_db(root / "state" / "soda.db")
    first = history.iteration(db, 1)
    assert first is not None
    columns = {key: first[key] for key in KEEP}
    events = Events(db)
    for number in range(runs.next_iteration_number(db), count + 1):
        row_id = runs.start_iteration(db, first["run_id"], number)
        runs.save_iteration(db, row_id, {**columns, "ended_at": first["ended_at"]})
        scoped = events.for_iteration(IterationRef(number, row_id))
        for turn in range(30):
            scoped.emit("agent.turn", {"agent": "executor", "turn": turn, "tokens_in": 900})


def timed(port: int, path: str) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    start = time.perf_counter()
    conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}"})
    response = conn.getresponse()
    response.read()
    assert response.status == 200, (path, response.status)
    conn.close()
    return time.perf_counter() - start


def stream_latency(root: Path, port: int, rounds: int) -> list[float]:
    """Seconds from an event's write to its arrival on an open stream."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/stream?kind=bench.", headers={"Host": f"127.0.0.1:{port}"})
    response = conn.getresponse()
    events = Events(open_db(root / "state" / "soda.db"))
    latencies = []
    for index in range(rounds):
        start = time.perf_counter()
        events.emit("bench.ping", {"index": index})
        while not response.fp.readline().startswith(b"data: "):
            pass
        latencies.append(time.perf_counter() - start)
        time.sleep(0.05)
    conn.close()
    return latencies


def summary(name: str, seconds: list[float]) -> str:
    ordered = sorted(seconds)
    p95 = ordered[max(0, int(len(ordered) * 0.95) - 1)]
    return (
        f"{name:<22} median {statistics.median(ordered) * 1000:7.1f} ms   p95 {p95 * 1000:7.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=200, help="iterations in the history")
    count = parser.parse_args().n
    with tempfile.TemporaryDirectory(prefix="soda-web-bench-") as temp:
        root = Path(temp) / "demo"
        soda = [sys.executable, "-m", "soda"]
        subprocess.run([*soda, "demo", "--dir", str(root)], check=True, capture_output=True)
        grow(root, count)
        log = root / "state" / "web-bench.log"
        with log.open("w") as out:
            server = subprocess.Popen(
                [*soda, "-C", str(root), "web", "--port", "0"], stdout=out, stderr=out
            )
        try:
            deadline = time.monotonic() + 30
            while "serving" not in log.read_text():
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit(f"soda web did not start: {log.read_text()}")
                time.sleep(0.05)
            port = int(log.read_text().split("127.0.0.1:", 1)[1].split("/", 1)[0])
            print(f"web dashboard, {count} iterations, {count * 30:,}+ events")
            for path in PAGES:
                timed(port, path)  # warm
                print(summary(path, [timed(port, path) for _ in range(20)]))
            print(summary("event -> stream", stream_latency(root, port, 20)))
        finally:
            server.terminate()
            server.wait(15)


if __name__ == "__main__":
    main()
