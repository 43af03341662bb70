"""Wall time of ACT for 4 independent tasks against 1 task, with model latency.

Each executor turn takes 1 s of simulated model latency (a FunctionModel that
sleeps before it answers; two turns per task: write a file, submit). Everything
else is real: the demo's sample project in a temporary directory, one worktree
per task, a merge commit per task, the gate in the jail. The baseline test run
is made before the clock starts (it is the same for 1 task or 4). Today's goal:
4 tasks take <= 1.3x the time of one (run one after another, they took 4x).

    python bench/parallel_tasks.py [--latency 1.0] [--tasks 4] [--sandbox bwrap|none]
                                   [--real-tests]

By default the test command is `true`, so the figure is about the executors
running at once; `--real-tests` gates with the sample's pytest suite instead
(each merge is tested on its own, one after another: that part does not overlap).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from soda.cli.demo import prepare
from soda.config import load
from soda.contracts import IterationPlan, PlanTask
from soda.gate import milestone_tests
from soda.llm.base import ModelRequest
from soda.llm.function import FunctionModel, Reply, call, first_turn, submit
from soda.loop.act import act
from soda.loop.session import Session

GOAL = 1.3


def executor(latency: float):
    def answer(request: ModelRequest) -> Reply:
        time.sleep(latency)  # the model thinking
        if first_turn(request):
            key = request.messages[0].text.split('"id": "', 1)[1].split('"', 1)[0]
            return call("write_file", path=f"notes/{key}.txt", content=f"{key}\n")
        return submit(
            {
                "tasks_blocked": [],
                "task_comments": [],
                "new_subtasks": [],
                "learnings": [],
                "summary": "wrote a note",
            }
        )

    return answer


def plan(count: int) -> IterationPlan:
    tasks = [
        PlanTask(
            id=f"t{n}",
            task_id=None,
            title=f"Note {n}",
            description=f"write notes/t{n}.txt",
            depends_on=[],
            risk="low",
            tool_hints=[],
        )
        for n in range(count)
    ]
    return IterationPlan(intent="notes", approach="one file each", tasks=tasks)


def act_seconds(count: int, args: argparse.Namespace, parent: Path) -> float:
    root = parent / f"project-{count}"
    prepare(root)
    config = load(root / "soda.toml")
    if not args.real_tests:
        config.project.test_command = "true"
    config.sandbox.mode = args.sandbox
    config.act.max_parallel_tasks = max(count, 1)
    config.act.task_retries = 0
    session = Session.open(
        config, model=FunctionModel.by_agent({"executor": executor(args.latency)})
    )
    try:
        # the baseline, cached by tree id: outside the clock
        milestone_tests(
            session.config, session.jail, session.db, session.checkouts, session.milestone.branch
        )
        it = session.begin_iteration()
        started = time.monotonic()
        result = act(session, it, plan(count), lambda line: None)
        elapsed = time.monotonic() - started
        if len(result.merged_commits) != count:
            raise SystemExit(f"{count} task(s): {result.outcome}: {result.detail}")
        return elapsed
    finally:
        session.finish_run("done", "bench")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per model turn")
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--sandbox", choices=("bwrap", "none"), default="bwrap")
    parser.add_argument("--real-tests", action="store_true", help="gate with the sample's pytest")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="soda-bench-parallel-") as tmp:
        one = act_seconds(1, args, Path(tmp))
        many = act_seconds(args.tasks, args, Path(tmp))
    ratio = many / one
    tests = "the sample's pytest" if args.real_tests else "`true`"
    print(f"model latency {args.latency:.1f} s a turn, 2 turns a task, tests: {tests}")
    print(f"ACT, 1 task:  {one:6.2f} s")
    print(f"ACT, {args.tasks} tasks: {many:6.2f} s (max_parallel_tasks = {args.tasks})")
    verdict = "ok" if ratio <= GOAL else "over the goal"
    print(f"ratio {ratio:.2f}x (goal <= {GOAL}x; one after another: {args.tasks}x): {verdict}")


if __name__ == "__main__":
    main()
