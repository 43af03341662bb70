"""What the jail adds to every command: `true` through Jail.run in bubblewrap vs unconfined.

Builds a repository with a worktree in a temporary directory (the shape soda
runs commands in: the worktree mounted at the repository's path, .git read-only,
a `.venv` bound beside it), then runs `true` through `Jail.run` with
`sandbox.mode = "bwrap"` and with `"none"`, interleaved, after a warm-up. Prints
the median and p95 of each and the milliseconds the jail adds (goal: <= 50 ms at
the median). Exits 1 when the goal is missed.

    python bench/jail_overhead.py [-n 50] [--warmup 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from soda.config import Config, SandboxConfig
from soda.system.jail import Jail

GOAL_MS = 50.0


def git(cwd: Path, *args: str) -> None:
    """Run git quietly; fail loudly."""
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def prepare(tmp: Path) -> tuple[Path, Path]:
    """A repository (one commit, an ignored .venv) and a detached worktree of it."""
    root = tmp / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / ".gitignore").write_text(".venv/\nstate/\n")
    (root / "app.py").write_text("print('hello')\n")
    git(root, "add", ".")
    git(
        root,
        "-c",
        "user.name=bench",
        "-c",
        "user.email=bench@example.invalid",
        "commit",
        "-q",
        "-m",
        "initial",
    )
    (root / ".venv").mkdir()
    worktree = root / "state" / "worktrees" / "view"
    git(root, "worktree", "add", "-q", "--detach", str(worktree), "HEAD")
    return root, worktree


def time_ms(jail: Jail, worktree: Path) -> float:
    """One run of `true`, in milliseconds (the `.venv` bind included each time)."""
    started = time.perf_counter()
    result = jail.run("true", worktree, timeout=30)
    elapsed = (time.perf_counter() - started) * 1000
    if not result.ok:
        raise SystemExit(f"`true` failed in mode {jail.mode}: {result.output}")
    return elapsed


def p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=20, method="inclusive")[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=50, help="measured runs per mode")
    parser.add_argument("--warmup", type=int, default=5, help="unmeasured runs per mode")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="soda-bench-") as tmp:
        root, worktree = prepare(Path(tmp))
        jails = {
            mode: Jail.for_config(Config(root=root, sandbox=SandboxConfig(mode=mode)))
            for mode in ("bwrap", "none")
        }
        jails["bwrap"].ensure_available()
        samples: dict[str, list[float]] = {mode: [] for mode in jails}
        for i in range(args.warmup + args.n):
            for mode, jail in jails.items():  # interleaved: drift hits both alike
                elapsed = time_ms(jail, worktree)
                if i >= args.warmup:
                    samples[mode].append(elapsed)
    print(f"`true` through Jail.run, {args.n} runs each after {args.warmup} warm-up runs")
    for mode, values in samples.items():
        print(
            f"  {mode:<5}  median {statistics.median(values):6.1f} ms   "
            f"p95 {p95(values):6.1f} ms   min {min(values):6.1f} ms"
        )
    added = statistics.median(samples["bwrap"]) - statistics.median(samples["none"])
    added_p95 = p95(samples["bwrap"]) - p95(samples["none"])
    verdict = "met" if added <= GOAL_MS else "MISSED"
    print(
        f"  added  median {added:6.1f} ms   p95 {added_p95:6.1f} ms   "
        f"(goal <= {GOAL_MS:.0f} ms: {verdict})"
    )
    return 0 if added <= GOAL_MS else 1


if __name__ == "__main__":
    sys.exit(main())
