"""One soda run on one prepared task repository, in a process of its own.

The harness starts this script per task so that a wall-clock timeout can stop
the run (SIGTERM: soda stops at the next safe point; a second: at once; then
SIGKILL), and so that a crash, a hung model call or a leaked lock in one task
cannot take the rest of the suite with it.

    python worker.py REPO RESULT.json [--fake solve|wrong|stall --task-dir DIR]

Without `--fake` the model is the one REPO's soda.toml configures (a real
provider). The loop's progress goes to stdout (the harness keeps it as the
task's log); RESULT.json gets `{"ending", "reason", "iteration",
"milestone_branch"}`, or `{"ending": "error" | "crash", "reason"}` when the run
could not start or broke.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench.` and `soda` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def run(repo: Path, fake: str | None, task_dir: Path | None) -> dict[str, Any]:
    """Run soda on `repo` until it ends; what the result file holds."""
    from soda.cli.run import drive
    from soda.config import load
    from soda.errors import UserError
    from soda.loop.host import open_run

    model = None
    if fake is not None:
        from bench.effectiveness.fake import fake_model
        from bench.effectiveness.suite import load_task

        assert task_dir is not None
        model = fake_model(load_task(task_dir), fake)
    try:
        loop = open_run(load(repo / "soda.toml"), model=model)
        result, _merged = drive(loop, lambda line: print(line, flush=True))
    except UserError as exc:  # a key missing, the jail unavailable: nothing ran
        return {"ending": "error", "reason": str(exc)}
    return {
        "ending": result.ending.value,
        "reason": result.reason,
        "iteration": result.number,
        "milestone_branch": loop.milestone.branch,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=Path)
    parser.add_argument("result", type=Path)
    parser.add_argument("--fake", choices=["solve", "wrong", "stall"])
    parser.add_argument("--task-dir", type=Path)
    args = parser.parse_args(argv)
    try:
        outcome = run(args.repo, args.fake, args.task_dir)
    except BaseException as exc:  # recorded for the report, whatever it was
        traceback.print_exc()
        outcome = {"ending": "crash", "reason": f"{type(exc).__name__}: {exc}"}
    args.result.write_text(json.dumps(outcome), encoding="utf-8")
    return 0 if outcome["ending"] not in ("crash", "error") else 1


if __name__ == "__main__":
    sys.exit(main())
