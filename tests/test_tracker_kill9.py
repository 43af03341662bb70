"""kill -9 while the daemon works a two-issue queue from the tracker
(tests/tracker_scenario.py: the real daemon in its own process, the GitHub
stand-in, a behavioural model behind a local Messages API): SIGKILLed after a
random number of its events, twice, then started again to finish. Every
issue ends done with exactly one pull request, one start comment, one comment
per merged iteration and one DONE comment; nothing is told twice, and a
writer's comment is read once. `bench/tracker_kill9.py` runs 20 trials."""

from __future__ import annotations

import random
from pathlib import Path

from tests.tracker_scenario import check, make_trial, run_with_kills

SEED = 20261128
"""The kill points are random but reproducible."""
KILLS = 2


def test_kill9_during_a_two_issue_queue_loses_and_doubles_nothing(tmp_path: Path) -> None:
    trial = make_trial(tmp_path)
    try:
        run_with_kills(trial, random.Random(SEED), KILLS)
        problems = check(trial)
    finally:
        trial.close()
    assert problems == [], f"killed at events {trial.kills} (seed {SEED}): {problems}"
    assert trial.kills, "no kill happened before the queue was done"
    print(f"killed at events {trial.kills}")
