"""A DONE whose pull request waits for its checks, finished by the daemon's
tracker poll (soda.forge.done) while it works the next issue, against the GitHub
stand-in with CI on every push (`FakeForge.ci`): the checks run at DONE, the
daemon moves on; after a restart, the stand-in reports them green and the next
read of the tracker marks the pull request ready and merges it (`forge.merge =
"when-green"`) with no model call and no comment on the issue; another issue's
failing check after DONE queues that issue again, its pull request a draft,
unmerged, and `soda issues` says why."""

from __future__ import annotations

import pytest

from soda.contracts.outcomes import RunStatus
from soda.daemon.issues import IssueQueue
from soda.forge.body import MARKER
from soda.store import tracker as rows
from tests.conftest import soda
from tests.test_loop import DEMO_SCRIPT
from tests.trackerhost import CRITERIA, Host, working

pytest_plugins = ("tests.fakeforge", "tests.trackerhost")

CI = "ci"


def told(host: Host, number: int) -> list[str]:
    bodies = [b for b in host.posted(number) if MARKER in b]
    return [b.split("<!-- soda:event ")[1].split(" -->")[0] for b in bodies]


def model_calls(host: Host) -> int:
    return int(host.run.db.execute("SELECT count(*) FROM agent_calls").fetchone()[0])


@pytest.mark.parametrize("host", [[*DEMO_SCRIPT, *DEMO_SCRIPT, *working(3)]], indirect=True)
def test_a_done_pull_request_is_ready_and_merged_once_green_while_the_next_issue_runs(
    host: Host,
) -> None:
    config = host.root / "soda.toml"
    text = config.read_text()
    assert text.count('merge = "never"') == 1
    config.write_text(text.replace('merge = "never"', 'merge = "when-green"'))
    host.daemon._reload(host.run)
    assert host.daemon.config.forge.merge == "when-green"
    host.forge.ci = CI  # every new head gets a running check run until finish_ci
    green = host.forge.add_issue("alice", "OWNER", "Green", CRITERIA, ("soda",))
    red = host.forge.add_issue("alice", "OWNER", "Red", CRITERIA, ("soda",))
    later = host.forge.add_issue("alice", "OWNER", "Later", "- [ ] notes", ("soda",))

    for number, pull in ((green, 1), (red, 2)):
        item = host.until(number, "done")
        assert item.pr_number == pull
        assert item.last_word == f"done: pull request #{pull} waits for its checks"
        assert host.forge.pulls[pull]["draft"]  # DONE waits for the running check
        assert "marked ready for review once its checks pass" in host.posted(number)[-1]
    host.tick()  # the next issue starts; the checks still run
    assert rows.item(host.run.db, later).state == "running"  # type: ignore[union-attr]
    assert host.forge.pulls[1]["draft"] and not host.forge.pulls[1]["merged"]
    listed = soda("issues", cwd=host.root).stdout
    assert "pull request #1 waits for its checks" in listed

    # A restart: the process's queue is gone; what waits is read from the rows.
    assert host.daemon.issues is not None
    host.daemon.issues.finish(RunStatus.INTERRUPTED, "killed")
    host.daemon.issues = IssueQueue(
        host.daemon.live, host.run.db, host.daemon.flags.stop, host.daemon.say,
        host.run.events, host.run.model,
    )  # fmt: skip
    host.forge.finish_ci(host.forge.head_of(f"soda/issue-{green}") or "", "success")
    host.forge.finish_ci(host.forge.head_of(f"soda/issue-{red}") or "", "failure")
    calls, iterations = model_calls(host), told(host, later)
    done = host.daemon.issues.poll(force=True)  # the tracker's read, as each look does it
    assert model_calls(host) == calls
    assert done is not None and done.requeued == [red]

    assert not host.forge.pulls[1]["draft"] and host.forge.pulls[1]["merged"]
    item = rows.item(host.run.db, green)
    assert item is not None and item.state == "done"
    assert item.last_word == "done: pull request #1 merged"
    assert host.forge.pulls[2]["draft"] and not host.forge.pulls[2]["merged"]
    item = rows.item(host.run.db, red)
    assert item is not None and item.state == "queued"
    assert f"{CI} (failure)" in (item.last_word or "")
    listed = soda("issues", cwd=host.root).stdout
    assert "pull request #1 merged" in listed and "checks failed after DONE" in listed
    for number in (green, red):  # settling wrote nothing on the issues
        assert told(host, number) == [
            "start",
            "merged-1" if number == green else "merged-3",
            "done",
        ]
        assert len(host.posted(number)) == 3
    assert rows.item(host.run.db, later).state == "running"  # type: ignore[union-attr]

    host.tick()  # the daemon goes on with the issue in progress
    assert len(told(host, later)) == len(iterations) + 1  # its next merge
    assert host.forge.pulls[1]["merged"]  # nothing settles twice
