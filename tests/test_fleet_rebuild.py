"""A worker lost after its push but before it reported: the next worker finds
the iteration's merge on the remote by its `Soda-Iteration` trailer, records it
instead of making it again, and its rebuilt record goes on from there. Real
git, a bare remote, the real jail; the iterations run in this process (the
workflow's part is in test_fleet.py)."""

from __future__ import annotations

from pathlib import Path

from soda.fleet.iteration import HeldRun, Progress, run_one
from soda.fleet.state import IterationRequest, IterationSummary, RunSettings
from tests.conftest import git
from tests.fleet_helpers import remote_project


def test_a_merge_on_the_remote_is_recorded_not_made_again(tmp_path: Path) -> None:
    url = remote_project(tmp_path, "landed")
    settings = RunSettings(url)
    lost, taker = HeldRun(), HeldRun()
    try:

        def request(
            number: int, fresh: bool, history: list[IterationSummary], position: int | None
        ) -> IterationRequest:
            return IterationRequest("run", settings, number, fresh, history, [], position, [])

        first = run_one(tmp_path / "a", "a", request(1, True, [], None), Progress(), print, lost)
        assert first.summary.outcome == "merged"
        # Worker a is lost before the workflow hears of it: b is handed iteration 1 again.
        again = run_one(tmp_path / "b", "b", request(1, True, [], None), Progress(), print, taker)
        assert (again.summary.outcome, again.summary.worker) == ("merged", "b")
        assert again.summary.merged_commit == first.summary.merged_commit
        assert "reached the remote" in again.summary.reason
        assert taker.session is None  # nothing ran: no model call, no merge
        log = git(
            Path(url), "log", "--merges", "--format=%(trailers:key=Soda-Iteration)", "soda/spec"
        )
        assert log.count("Soda-Iteration: 1") == 1
        # b's record goes on at iteration 2 (the scripted model told where a left it:
        # a model that answers from the request needs no telling).
        done = run_one(
            tmp_path / "b",
            "b",
            request(2, False, [again.summary], first.model_position),
            Progress(),
            print,
            taker,
        )
        assert (done.summary.number, done.summary.ending) == (2, "done")
        log = git(
            Path(url), "log", "--merges", "--format=%(trailers:key=Soda-Iteration)", "soda/spec"
        )
        assert log.count("Soda-Iteration: 1") == 1
    finally:
        lost.close()
        taker.close()
