"""Wake latency of the idle daemon: a file dropped into state/inbox/ -> SENSE started.

Prepares the demo project, starts the daemon with `soda start`, lets it reach
DONE, then drops N inbox files one at a time. Each one wakes the daemon, which
runs one (scripted) iteration; the latency is from the file's write to the
`sense.start` event. Prints the median and p95, then stops the daemon. Files an
editor writes wait 0.2 s to settle; `--tell` files arrive whole and do not.

    python bench/wake_latency.py [-n 20] [--tell]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from soda.cli.demo import SCRIPT_PATH, prepare
from soda.contracts import HumanInput
from soda.human.write import write_input

ROOT = Path(__file__).resolve().parent.parent
CHECK_AGAIN = [
    {
        "agent": "verifier",
        "tool_calls": [
            {
                "name": "submit",
                "input": {
                    "checks": [],
                    "task_updates": [],
                    "learnings": [],
                    "summary": "unchanged",
                    "learning_verdicts": [],
                },
            }
        ],
    },
    {
        "agent": "assessor",
        "tool_calls": [
            {
                "name": "submit",
                "input": {
                    "spec_satisfied": True,
                    "confidence": "high",
                    "gaps": [],
                    "summary": "still met",
                },
            }
        ],
    },
]


def soda(root: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "soda", *args], cwd=root, capture_output=True, text=True, timeout=60
    )
    if done.returncode != 0:
        raise SystemExit(f"soda {' '.join(args)} failed: {done.stderr}")
    return done.stdout


def wait(db: Path, sql: str, seconds: float) -> list[tuple]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        conn = sqlite3.connect(db, timeout=10)
        rows = conn.execute(sql).fetchall()
        conn.close()
        if rows:
            return rows
        time.sleep(0.01)
    raise SystemExit(f"timed out waiting for: {sql}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=20, help="files to drop")
    parser.add_argument(
        "--tell",
        action="store_true",
        help="drop files the way `soda tell` does (atomic, no settling) instead of as an editor",
    )
    args = parser.parse_args()
    script = json.loads((ROOT / "soda" / "demo" / "script.json").read_text())["responses"]
    with tempfile.TemporaryDirectory(prefix="soda-wake-") as tmp:
        root = Path(tmp) / "demo"
        prepare(root)
        text = json.dumps({"responses": script + CHECK_AGAIN * args.n})
        (root / SCRIPT_PATH).write_text(text.replace("{python}", json.dumps(sys.executable)[1:-1]))
        db = root / "state" / "soda.db"
        soda(root, "start")
        try:
            wait(db, "SELECT 1 FROM iterations WHERE decision = 'DONE'", 120)
            latencies = []
            for n in range(args.n):
                time.sleep(0.3)  # let the daemon settle into idle
                seen = wait(
                    db, "SELECT COALESCE(MAX(id), 0) FROM events WHERE kind = 'sense.start'", 5
                )
                dropped = datetime.now().astimezone()
                if args.tell:
                    write_input(root / "state", HumanInput(kind="correction", text=f"note {n}"))
                else:
                    (root / "state" / "inbox" / f"note-{n}.md").write_text(f"note {n}\n")
                (ts,) = wait(
                    db,
                    f"SELECT ts FROM events WHERE kind = 'sense.start' AND id > {seen[0][0]}",
                    30,
                )[0]
                latencies.append((datetime.fromisoformat(ts) - dropped).total_seconds() * 1000)
                wait(
                    db,
                    f"SELECT 1 FROM iterations WHERE number = {n + 3} AND ended_at IS NOT NULL",
                    30,
                )
        finally:
            soda(root, "stop")
    latencies.sort()
    p95 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.95))]
    print(
        f"wake latency (file dropped -> SENSE started) over {len(latencies)} files: "
        f"median {statistics.median(latencies):.0f} ms, p95 {p95:.0f} ms, "
        f"max {latencies[-1]:.0f} ms"
    )


if __name__ == "__main__":
    main()
