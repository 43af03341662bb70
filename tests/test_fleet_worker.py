"""A worker does what the fleet's row of soda.loop.policy says after its
iteration, as the daemon does after its own: a HALT runs the repository's
`notify_command` and closes the worker's run record. Real git, a bare remote,
the real jail; the iteration runs in this process (the workflow's part, with
STUCK and DONE told, is in test_fleet.py)."""

from __future__ import annotations

from pathlib import Path

from soda.fleet.iteration import HeldRun, Progress, run_one
from soda.fleet.state import IterationRequest, RunSettings
from tests.fleet_helpers import remote_project


def test_a_halt_on_a_worker_is_told_and_closes_its_run(tmp_path: Path) -> None:
    notified = tmp_path / "notified.txt"
    url = remote_project(tmp_path, "halts", [], notified=notified)  # the script runs out
    held = HeldRun()
    try:
        request = IterationRequest("run", RunSettings(url), 1, True, [], [], [])
        report = run_one(tmp_path / "a", "a", request, Progress(), print, held)
        assert (report.summary.ending, report.summary.decision) == ("halt", "HALT")
        assert "ran out" in report.summary.reason
        assert notified.read_text().splitlines() == ["HALT 1"]
        assert held.run is not None and not held.run.is_open  # the worker's record closed
        runs = held.run.db.execute("SELECT status, final_reason FROM runs").fetchall()
        assert [status for status, _ in runs] == ["halt"]
    finally:
        held.close()
