"""A worker lost after its push but before it reported: the next worker reads
the iteration's report from the remote (pushed atomically with the milestone)
and goes on where the lost one was, the scripted model's place and the Trace
tasks included; without that report, it finds the iteration's merges by their
`Soda-Iteration` trailers and records them instead of making them again. A
merge the remote refuses is never reported as landed. Real git, bare remotes,
the real jail; the iterations run in this process (the workflow's part is in
test_fleet.py)."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pytest

from soda.errors import TransientError
from soda.fleet import checkout
from soda.fleet.checkout import MARKER, REPORT_REF, run_home
from soda.fleet.iteration import HeldRun, Progress, run_one
from soda.fleet.state import (
    CarriedTask,
    IterationReport,
    IterationRequest,
    IterationSummary,
    RunSettings,
)
from soda.repo.push import Retry
from tests.conftest import git
from tests.fleet_helpers import LATER_TASK, WITH_LATER_TASK, remote_project

TOKEN = "first-run-id"


def request(
    settings: RunSettings,
    number: int,
    fresh: bool,
    history: list[IterationSummary],
    tasks: list[CarriedTask],
) -> IterationRequest:
    return IterationRequest(
        "run", settings, number, fresh, history, [], [], tasks=tasks, token=TOKEN
    )


def merges(url: str) -> str:
    return git(Path(url), "log", "--merges", "--format=%(trailers:key=Soda-Iteration)", "soda/spec")


def task_rows(cache: Path) -> list[tuple[int, str, str]]:
    path = run_home(cache, "run").root / "state" / "soda.db"
    with sqlite3.connect(path) as db:
        return db.execute("SELECT id, title, status FROM tasks ORDER BY id").fetchall()


def first_iteration(tmp_path: Path, held: HeldRun) -> tuple[str, RunSettings, IterationReport]:
    url = remote_project(tmp_path, "landed", WITH_LATER_TASK)
    settings = RunSettings(url)
    first = run_one(
        tmp_path / "a", "a", request(settings, 1, True, [], []), Progress(), print, held
    )
    assert (first.summary.outcome, first.summary.worker) == ("merged", "a")
    later = next(task for task in first.tasks if task.title == LATER_TASK["title"])
    assert (later.id, later.status) == (2, "open")
    return url, settings, first


def test_a_lost_report_is_read_from_the_remote_and_the_run_goes_on(tmp_path: Path) -> None:
    lost, taker = HeldRun(), HeldRun()
    try:
        url, settings, first = first_iteration(tmp_path, lost)
        # Its report is on the remote beside the milestone it describes.
        stored = git(Path(url), "show", f"{REPORT_REF.format(run='run')}:report.json")
        assert f'"merged_commit": "{git(Path(url), "rev-parse", "soda/spec")}"' in stored
        assert first.summary.merged_commit == git(Path(url), "rev-parse", "soda/spec")
        # Worker a is lost before the workflow hears of it: b is handed iteration 1 again.
        again = run_one(
            tmp_path / "b", "b", request(settings, 1, True, [], []), Progress(), print, taker
        )
        assert again == first  # a's own report: learnings, tasks
        assert taker.run is None  # nothing ran: no model call, no merge
        assert merges(url).count("Soda-Iteration: 1") == 1
        # b's record holds the Trace tasks a left, with their ids and titles.
        carried = [(t.id, t.title, t.status) for t in first.tasks]
        assert task_rows(tmp_path / "b") == carried
        assert task_rows(tmp_path / "a")[: len(carried)] == carried
        # The scripted model starts at iteration 2's answers: no replay.
        done = run_one(
            tmp_path / "b",
            "b",
            request(settings, 2, False, [again.summary], again.tasks),
            Progress(),
            print,
            taker,
        )
        assert (done.summary.number, done.summary.ending) == (2, "done")
        assert merges(url).count("Soda-Iteration: 1") == 1
        assert (2, LATER_TASK["title"]) in {(t.id, t.title) for t in done.tasks}
    finally:
        lost.close()
        taker.close()


def test_merges_without_their_report_are_recorded_from_their_trailers(tmp_path: Path) -> None:
    lost, taker = HeldRun(), HeldRun()
    try:
        url, settings, first = first_iteration(tmp_path, lost)
        # a was lost after its merges reached the remote, before its report did.
        git(Path(url), "update-ref", "-d", REPORT_REF.format(run="run"))
        planned = next(t for t in first.tasks if t.title.startswith("Implement calc"))
        carried = [  # as if the plan's task had been carried open into iteration 1
            CarriedTask(t.id, t.title, "open" if t is planned else t.status, t.parent_id)
            for t in first.tasks
        ]
        again = run_one(
            tmp_path / "b",
            "b",
            request(settings, 1, True, [], carried),
            Progress(),
            print,
            taker,
        )
        assert (again.summary.outcome, again.summary.worker) == ("merged", "b")
        assert again.summary.merged_commit == first.summary.merged_commit
        assert "reached the remote" in again.summary.reason
        closed = next(t for t in again.tasks if t.id == planned.id)
        assert closed.status == "closed"  # its merge names it (Soda-Task)
        assert taker.run is None
        assert merges(url).count("Soda-Iteration: 1") == 1
        assert (planned.id, planned.title, "closed") in task_rows(tmp_path / "b")
    finally:
        lost.close()
        taker.close()


def test_a_merge_the_remote_refuses_is_not_reported_as_landed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = remote_project(tmp_path, "refused", WITH_LATER_TASK)
    tries = tmp_path / "tries"
    hook = Path(url) / "hooks" / "pre-receive"
    hook.write_text(f"#!/bin/sh\necho try >> {tries}\nexit 1\n")
    hook.chmod(0o755)
    monkeypatch.setattr(checkout, "PUSH_RETRY", Retry(attempts=3, wait=0.01))
    held = HeldRun()
    try:
        with pytest.raises(TransientError, match="cannot push soda/spec"):
            run_one(
                tmp_path / "a",
                "a",
                request(RunSettings(url), 1, True, [], []),
                Progress(),
                print,
                held,
            )
        assert tries.read_text().count("try") == 3  # retried, then given up
        assert not git(Path(url), "branch", "--list", "soda/spec")  # the remote never had it
        assert held.run is None  # the next attempt starts afresh from the remote
    finally:
        held.close()


def test_only_marked_run_directories_leave_the_cache(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    old, recent, foreign = (run_home(cache, name).home for name in ("old", "recent", "foreign"))
    for home in (old, recent, foreign):
        (home / "repo").mkdir(parents=True)
    (old / MARKER).write_text("url\n")
    (recent / MARKER).write_text("url\n")
    day_ago = time.time() - 25 * 3600
    os.utime(old / MARKER, (day_ago, day_ago))
    os.utime(foreign, (day_ago, day_ago))
    assert checkout.sweep(cache, 24 * 3600) == ["old"]
    assert not old.exists() and recent.exists() and foreign.exists()
    assert checkout.forget(cache, "recent") and not recent.exists()
    assert not checkout.forget(cache, "foreign") and foreign.exists()  # not the worker's
