"""`run.py --check`: are the tasks themselves sound? No model, no loop.

For each task, on its starting repository: the project's own tests pass and the
acceptance tests fail (there is something to do); with `solution/` applied,
everything passes (the task can be solved); with `wrong/` applied, the
project's own tests still pass (the gate would merge it) and the acceptance
tests fail (they catch the plausible mistake). A task that breaks one of these
measures nothing, so `--check` is worth running after writing or editing one.
"""

from __future__ import annotations

from pathlib import Path

from bench.effectiveness.acceptance import Acceptance, judge
from bench.effectiveness.harness import ModelChoice, prepare, task_config
from bench.effectiveness.suite import Task
from soda.config import load
from soda.repo.git import commit_all, open_repo


def check_task(task: Task, workdir: Path) -> list[str]:
    """What is wrong with `task` (empty: nothing), built in `workdir` (new)."""
    repo_dir = workdir / "repo"
    prepare(task, repo_dir, task_config(task, ModelChoice.offline()))
    config = load(repo_dir / "soda.toml")
    repo = open_repo(repo_dir)
    problems: list[str] = []

    def judged(ref: str) -> Acceptance:
        return judge(task, config, repo_dir, ref, workdir / f"checkout-{ref.replace('/', '-')}")

    start = judged(config.project.base_branch)
    if start.own_failed:
        problems.append(f"start: the project's own tests fail ({start.summary})")
    if start.solved or start.total == 0:
        problems.append(f"start: the acceptance tests do not fail ({start.summary})")
    for kind in ("solution", "wrong"):
        change = task.change(kind)
        if not change.paths:
            if kind == "solution":
                problems.append("no solution/ (the offline fake needs one)")
            continue
        repo.git.checkout("-q", "-b", f"check/{kind}", config.project.base_branch)
        change.apply(repo_dir)
        changed = repo.is_dirty(untracked_files=True)
        if changed:
            commit_all(repo, f"check: {kind}")
        repo.git.checkout("-q", config.project.base_branch)
        if not changed:
            problems.append(f"{kind}: changes nothing in the starting repository")
            continue
        result = judged(f"check/{kind}")
        if kind == "solution" and not result.solved:
            problems.append(f"solution: not solved ({result.summary})")
        if kind == "wrong" and result.own_failed:
            problems.append(f"wrong: breaks the project's own tests ({result.summary})")
        if kind == "wrong" and result.solved:
            problems.append(f"wrong: the acceptance tests do not catch it ({result.summary})")
    return problems
