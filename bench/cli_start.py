"""What a soda command costs to start: CPU seconds (user + system) and wall time
of `python -m soda COMMAND` in a finished demo project, each command run N times,
medians printed. Start-up is most of what a read command or a queued input
costs, and the test suite starts a few hundred of them.

    python bench/cli_start.py [-n 7]

Runs the checkout it is in; to compare two revisions, run it in each.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = (
    ("--version",),
    ("status",),
    ("history",),
    ("show", "1"),
    ("tasks",),
    ("cost",),
    ("tell", "a correction"),
    ("run", "--plan-only"),
)


def cost(args: tuple[str, ...], cwd: Path) -> tuple[float, float]:
    """CPU seconds and wall seconds of one `soda ARGS` in `cwd` (its own use, and
    that of any child it waited for)."""
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "soda", *args],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) not in (0, 3):
        raise SystemExit(f"soda {' '.join(args)} failed in {cwd}")
    return usage.ru_utime + usage.ru_stime, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=7, help="runs of each command")
    n = parser.parse_args().n
    with tempfile.TemporaryDirectory(prefix="soda-bench-") as tmp:
        project = Path(tmp) / "demo"
        subprocess.run(
            [sys.executable, "-m", "soda", "demo", "--dir", str(project)],
            check=True,
            capture_output=True,
        )
        print(f"{'command':<22} {'cpu s':>7} {'wall s':>7}   (medians of {n})")
        total = 0.0
        for args in COMMANDS:
            runs = [cost(args, project) for _ in range(n)]
            cpu = statistics.median(c for c, _ in runs)
            wall = statistics.median(w for _, w in runs)
            total += cpu
            print(f"{' '.join(args):<22} {cpu:7.3f} {wall:7.3f}")
        print(f"{'all':<22} {total:7.3f}")


if __name__ == "__main__":
    main()
