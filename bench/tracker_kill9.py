"""kill -9 during a two-issue queue from the tracker, many trials: each trial is
a fresh project, GitHub stand-in and model API (tests/tracker_scenario.py); the
real daemon is SIGKILLed after a random number of events, `--kills` times, then
started again to finish the queue. Goal: in every trial, every issue ends done
with exactly one pull request, one start comment, one comment per merged
iteration and one DONE comment, nothing told twice, a writer's comment read once.

    python bench/tracker_kill9.py [--trials 20] [--kills 3] [--seed 20261128]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.*

from tests.tracker_scenario import check, make_trial, run_with_kills


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--seed", type=int, default=20261128)
    args = parser.parse_args()
    failed = 0
    kills = 0
    began = time.monotonic()
    for number in range(args.trials):
        rng = random.Random(args.seed + number)
        with tempfile.TemporaryDirectory(prefix="soda-tracker-kill9-") as where:
            started = time.monotonic()
            trial = make_trial(Path(where))
            try:
                run_with_kills(trial, rng, args.kills)
                problems = check(trial)
            except AssertionError as exc:
                problems = [f"did not finish: {exc}"]
                keep = Path(tempfile.gettempdir()) / f"soda-tracker-kill9-{args.seed + number}.log"
                log = trial.root / "state" / "daemon-out.log"
                keep.write_bytes(log.read_bytes() if log.exists() else b"")
            finally:
                trial.close()
        kills += len(trial.kills)
        failed += bool(problems)
        verdict = "ok" if not problems else f"FAILED: {problems}"
        print(
            f"trial {number + 1:2}/{args.trials} seed {args.seed + number}: killed at events"
            f" {trial.kills}, {time.monotonic() - started:.1f} s, {verdict}",
            flush=True,
        )
    print(
        f"{args.trials - failed}/{args.trials} trials clean, {kills} kills in all,"
        f" {time.monotonic() - began:.0f} s"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
