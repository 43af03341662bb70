"""A plan waiting for approval, between a worker's record and the workflow.

A fleet run's loop always suspends a plan that needs a person
(`[approval] wait = "suspend"`, soda.human.approval): the iteration keeps the
plan in the worker's record (`soda.store.approvals`) and ends STUCK. Its report
carries the plan (`ApprovalWait`) to the workflow, which holds the wait as a
durable timer with no worker. Before the next iteration, wherever it runs, the
worker's record is made to agree: a fresh record gets the waiting plan again
(with the Trace tasks it names), and a wait whose timer fired is expired there,
so the loop rejects the plan whatever the worker's clock says.

A merge the gate may not make alone is held the same way (soda.loop.act.held):
the report carries the held merges, and the work they keep under
refs/soda/approvals/ goes to the remote with the milestone (`push_kept`), so
the worker that runs the next iteration, wherever it is, fetches it (`agree`)
and merges it once approved, or drops it on a rejection.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from typing import Any

import git

from soda.config import Config
from soda.contracts import IterationPlan
from soda.errors import SodaError, TransientError
from soda.fleet.checkout import PUSH_RETRY
from soda.fleet.state import ApprovalWait
from soda.human.approval import waiting_what
from soda.loop.host import KEPT_REF, Run
from soda.repo.milestone import milestone_name
from soda.repo.push import push as push_refs
from soda.store import approvals, tasks

KEPT_REFSPEC = "+" + KEPT_REF.format("*") + ":" + KEPT_REF.format("*")
"""The held merges' kept work, the same refs on the worker and on the remote."""


def suspending(config: Config) -> Config:
    """The run's config, its plans suspended for approval instead of waiting in
    the iteration (the workflow counts the timeout)."""
    if config.approval.wait == "suspend":
        return config
    approval = config.approval.model_copy(update={"wait": "suspend"})
    changed = config.model_copy(update={"approval": approval})
    changed.root = config.root
    return changed


def reported(run: Run) -> ApprovalWait | None:
    """The plan that waits for approval in the worker's record, for the workflow."""
    waiting = approvals.waiting(run.db)
    if waiting is None:
        return None
    known = [task.id for task in tasks.of_milestone(run.db, milestone_name(run.config))]
    return ApprovalWait(
        waiting.iteration,
        json.loads(waiting.plan_json),
        waiting.timeout,
        waiting.deadline,
        known,
        run.config.plan.max_tasks,
        kind=waiting.kind,
        what=waiting_what(waiting),
        merges=approvals.held_merges(waiting),
    )


def agree(run: Run, approval: ApprovalWait | None) -> None:
    """Before an iteration: the worker's record holds the plan (or the held
    merges) the workflow says waits (a fresh record has none yet), expired when
    its timer fired; held merges' kept work is fetched from the remote."""
    if approval is None:
        return
    if approval.kind == "merge":
        fetch_kept(run)
    waiting = approvals.waiting(run.db)
    if waiting is None or waiting.iteration != approval.iteration:
        plan = _with_tasks(run, IterationPlan.model_validate(approval.plan))
        merges = _with_merge_tasks(approval.merges, plan)
        waiting = approvals.wait(
            run.db,
            iteration_id=None,
            iteration=approval.iteration,
            plan_json=plan.model_dump_json(),
            timeout=approval.timeout,
            deadline=approval.deadline,
            kind=approval.kind,
            merge_json=json.dumps(merges) if approval.kind == "merge" else None,
        )
    if approval.expired:
        approvals.expire(run.db, waiting.id)


def _with_tasks(run: Run, plan: IterationPlan) -> IterationPlan:
    """The plan with a Trace task in this record for each of its tasks: one the
    record lacks (a fresh worker's) is made again with the same id, so a
    person's edit naming it still fits; another id only if that one is taken."""
    milestone = milestone_name(run.config)
    root = run.milestone.root_task_id
    bound = []
    for task in plan.tasks:
        if task.task_id is None or tasks.exists(run.db, milestone, task.task_id):
            bound.append(task)
            continue
        fields = (run.db, milestone, task.title, task.description, root, task.risk)
        try:
            tasks.insert(*fields, task_id=task.task_id)
        except sqlite3.IntegrityError:  # the id is another task's here
            task = task.model_copy(update={"task_id": tasks.insert(*fields)})
        bound.append(task)
    return plan.model_copy(update={"tasks": bound})


def _with_merge_tasks(merges: list[dict[str, Any]], plan: IterationPlan) -> list[dict[str, Any]]:
    """The held merges with their tasks as `plan` has them (bound to this record)."""
    by_key = {task.id: task.model_dump(mode="json") for task in plan.tasks}
    return [{**merge, "task": by_key.get(merge["task"]["id"], merge["task"])} for merge in merges]


def fetch_kept(run: Run) -> None:
    """The held merges' kept work from the remote (a fresh clone has none)."""
    try:
        run.repo.git.fetch("origin", KEPT_REFSPEC)
    except git.GitCommandError as exc:
        raise TransientError(f"cannot fetch the work kept for approval: {_last(exc)}") from exc


def push_kept(
    config: Config,
    before: ApprovalWait | None,
    after: ApprovalWait | None,
    say: Callable[[str], None] | None = None,
) -> None:
    """After an iteration that held merges, or acted on held ones: the kept work
    of what waits now goes to the remote, and what was spent (merged, rejected)
    is deleted there, in one atomic push (the one push code, retried as the
    milestone's push is), before the report says what waits. A TransientError
    when it never succeeds: the iteration runs again."""
    specs = _kept_refspecs(git.Repo(config.root), before, after)
    if not specs:
        return
    try:
        push_refs(
            config.root, "origin", specs, atomic=len(specs) > 1, retry=PUSH_RETRY,
            env=os.environ, say=say,
        )  # fmt: skip
    except SodaError as exc:
        raise TransientError(f"cannot push the work kept for approval: {exc}") from exc


def _kept_refspecs(
    repo: git.Repo, before: ApprovalWait | None, after: ApprovalWait | None
) -> list[str]:
    """Refspecs that make the remote's kept refs what `after` keeps: each kept
    merge's commit, and a deletion for each of `before`'s the remote still has."""
    keep = {merge["ref"]: merge["commit"] for merge in _merges(after)}
    specs = [f"+{commit}:{ref}" for ref, commit in keep.items()]
    spent = [merge["ref"] for merge in _merges(before) if merge["ref"] not in keep]
    if spent:
        try:
            listed = str(repo.git.ls_remote("origin", *spent))
        except git.GitCommandError as exc:
            raise TransientError(f"cannot list the work kept for approval: {_last(exc)}") from exc
        there = {line.split("\t")[1] for line in listed.splitlines() if "\t" in line}
        specs += [f":{ref}" for ref in spent if ref in there]
    return specs


def _merges(wait: ApprovalWait | None) -> list[dict[str, Any]]:
    return wait.merges if wait is not None and wait.kind == "merge" else []


def _last(exc: git.GitCommandError) -> str:
    lines = str(exc.stderr or exc).strip().splitlines()
    return lines[-1].strip() if lines else str(exc)
