"""Evidence for ORIENT, read from what soda already recorded: the milestone tip's
tests (the test-results cache, by tree id) and the last attempt (the newest
iteration record that acted, and its task commits). Everything is bounded: a
few failing tests with the first lines of each, short summaries, a capped
diffstat. SENSE puts them in the claims; the `run_tests` tool uses the same
bounds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from git import GitCommandError, Repo
from sqlite_utils import Database

from soda.contracts import LastAct, TaskAttempt, TestFailure, TestsBrief
from soda.gate.runner import TestReport
from soda.repo.refs import tree_of
from soda.store import runs, test_results

MAX_FAILING = 10
"""Failing tests named (with the first lines of each); the rest are counted."""
MAX_FAILURE_LINES = 3
MAX_FAILURE_CHARS = 300
MAX_ATTEMPT_FILES = 10
"""Files named in the last attempt's diffstat (the most changed)."""
MAX_TASKS = 10
MAX_TEXT = 400
"""Characters of an executor's summary, or of ACT's reason, in `last_act`."""
LAST_ACT_WINDOW = 20
"""How many recent iterations are searched for the last one that acted."""


def first_lines(text: str) -> str:
    """The first MAX_FAILURE_LINES non-blank lines of a failure, at most
    MAX_FAILURE_CHARS characters."""
    lines = [line.rstrip() for line in (text or "").splitlines() if line.strip()]
    shown = "\n".join(lines[:MAX_FAILURE_LINES])
    return shown if len(shown) <= MAX_FAILURE_CHARS else shown[:MAX_FAILURE_CHARS] + "..."


def failing(failures: dict[str, str]) -> list[TestFailure]:
    """The first MAX_FAILING of `failures` (test id -> failure text), bounded."""
    return [
        TestFailure(test=name, first_lines=first_lines(text))
        for name, text in list(failures.items())[:MAX_FAILING]
    ]


def tests_brief(report: TestReport, commit: str) -> TestsBrief:
    failed = sorted(report.failed)
    return TestsBrief(
        commit=commit[:10],
        summary=report.summary(),
        failing=failing({name: report.failures.get(name, "") for name in failed}),
        failing_total=len(failed),
    )


def tip_tests(db: Database, repo: Repo, head: str) -> TestsBrief | None:
    """The newest test run on the tip's tree (the gate's, DONE's or run_tests'):
    results are cached by tree, so one indexed lookup finds them."""
    found = test_results.latest_for_tree(db, tree_of(repo, head))
    if found is None:
        return None
    commit, report = found
    try:
        return tests_brief(TestReport.from_json(report), commit)
    except (KeyError, TypeError, ValueError):  # a report stored by an older soda
        return None


def last_act(db: Database, repo_path: Path, before: int) -> LastAct | None:
    """The newest iteration below `before` that acted (of any run): its outcome,
    the tests the gate held against it, what each task's executor said, and what
    the attempt changed, merged or not (its task commits outlive the work branch)."""
    row = runs.last_act_record(db, before, LAST_ACT_WINDOW)
    if row is None:
        return None
    number, intent, act_json = row
    act = json_object(act_json)
    failures = act.get("failing") if isinstance(act.get("failing"), dict) else {}
    tasks = [t for t in act.get("tasks") or [] if isinstance(t, dict)]
    return LastAct(
        iteration=number,
        intent=intent,
        outcome=str(act.get("outcome") or ""),
        detail=clip(str(act.get("detail") or "")),
        tests=str(act.get("after") or ""),
        failing=failing({str(k): str(v) for k, v in (failures or {}).items()}),
        failing_total=len(failures or {}),
        diffstat=_attempt_diffstat(repo_path, tasks),
        tasks=[_attempt(task) for task in tasks[:MAX_TASKS]],
    )


def clip(text: str, limit: int = MAX_TEXT) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + "..."


def _attempt(task: dict[str, Any]) -> TaskAttempt:
    result = task.get("result") if isinstance(task.get("result"), dict) else None
    said = (result or {}).get("summary") or task.get("reason") or ""
    task_id = task.get("task_id")
    return TaskAttempt(
        task_id=task_id if isinstance(task_id, int) else None,
        title=str(task.get("title") or ""),
        status=str(task.get("status") or ""),
        summary=clip(str(said)) or None,
    )


def _attempt_diffstat(repo_path: Path, tasks: list[dict[str, Any]]) -> str:
    """What the attempt changed: each task's own diff stat as ACT recorded it
    (tasks run in worktrees of their own, possibly side by side), clipped; for a
    record without them, the task commits from the first one's parent to the last
    (tasks then ran one after another in one worktree); '' when nothing is left."""
    stats = [
        f"[{t.get('key', '?')}] {t['diffstat'].strip()}"
        for t in tasks
        if isinstance(t.get("diffstat"), str) and t["diffstat"].strip()
    ]
    if stats:
        lines = "\n".join(stats).splitlines()
        more = len(lines) - MAX_ATTEMPT_FILES * 2
        return "\n".join(lines[: MAX_ATTEMPT_FILES * 2]) + (
            f"\n... {more} more lines" if more > 0 else ""
        )
    commits = [t["commit"] for t in tasks if isinstance(t.get("commit"), str) and t["commit"]]
    if not commits:
        return ""
    git = Repo(repo_path, search_parent_directories=True).git
    try:
        numstat = git.diff("--numstat", f"{commits[0]}^", commits[-1])
    except GitCommandError:  # the objects are gone (gc), or a root commit
        return ""
    return diffstat(numstat, MAX_ATTEMPT_FILES)[1]


def diffstat(numstat: str, max_files: int) -> tuple[list[str], str]:
    """Changed files, most changed first, and a `--stat`-like summary of the first
    `max_files` of them (the total first, then one line per file, then how many
    more), from one `git diff --numstat` (one git call instead of two)."""
    rows, added, removed = [], 0, 0
    for row in numstat.splitlines():
        plus, minus, path = row.split("\t", 2)
        binary = plus == "-"
        churn = 0 if binary else int(plus) + int(minus)
        added += 0 if binary else int(plus)
        removed += 0 if binary else int(minus)
        rows.append((-churn, path, "binary" if binary else f"+{plus} -{minus}"))
    if not rows:
        return [], ""
    rows.sort()
    lines = [f"{len(rows)} files changed, +{added} -{removed}"]
    lines += [f"{path} | {change}" for _, path, change in rows[:max_files]]
    if len(rows) > max_files:
        lines.append(f"... {len(rows) - max_files} more files")
    return [path for _, path, _ in rows], "\n".join(lines)


def json_object(text: str | None) -> dict[str, Any]:
    """A JSON record's object, {} when it is missing or not an object."""
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
