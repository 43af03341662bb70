"""The tracker's queue run in the fleet (`[tracker] fleet`): each issue its own
fleet run, several at once, on the `soda worker`s; here only the poll.

    poll     one function for the daemon's poll and `soda issues sync`
             (`poll`): soda.forge.tracker.sync, then, for each issue:
    start    a queued writer's issue whose "Depends on #M" are done: its run's
             id written first (soda.store.tracker_runs), then the run started
             with the spec's text and the soda.toml read here in its settings
             (the spec is not committed: a worker's clone would not see it),
             then the issue marked running and its start comment written. The
             id is the repository's and the spec's, and the server refuses a
             second run of an id: a kill -9 anywhere starts it at most once
    tell     a writer's new comment on the thread, read once as the one-machine
             path reads it (`/soda approve` checked against the run's memo),
             sent to the run as a signal keyed by the comment (the run drops a
             second of a key); `/soda stop` cancels the issue
    look     each run's memo, read again: a comment per merged iteration, and
             DONE (the pull request) / STUCK (what the run waits for) / HALT,
             once each; the issue's state follows the run's
    cancel   an issue cancelled (`/soda stop`, its label removed by a writer, or
             closed): its run is stopped and the issue told once

Every comment goes through soda.forge.tracker.write_back (one per event, never
twice, across a kill -9), and what is owed is read from the run's memo each
time, never from what this process remembers. The fleet itself is the `Fleet`
port: soda.fleet.issues on Temporal (this room may not import it; the CLI
hands it in).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from sqlite_utils import Database

from soda.config import CONFIG_NAME, Config, LiveConfig
from soda.contracts import HumanInput
from soda.contracts.outcomes import RunStatus
from soda.daemon import told
from soda.daemon.fleet_memo import NoRun, ended, ending_text, start_text, state_of
from soda.errors import TransientError
from soda.forge import Tracker, connect, connect_tracker
from soda.forge.push import remote_url
from soda.forge.thread import issue_of, source_of
from soda.forge.tracker import Synced, read_thread, ready, sync, write_back
from soda.human import commands
from soda.human.routing import Control
from soda.loop.host import Run, StepReport
from soda.store import tracker as rows
from soda.store import tracker_runs as fleet_rows

Printer = Callable[[str], None]


class Fleet(Protocol):
    """The fleet as the tracker uses it; soda.fleet.issues.TemporalFleet is it
    on a Temporal server. Failures: TransientError (the server is not there)."""

    def run_id(self, repo_url: str, spec: str) -> str:
        """The run of this repository and spec: the same id every time."""
        ...

    def start(
        self, repo_url: str, spec: str, spec_text: str, config_text: str, max_iterations: int
    ) -> str:
        """Start the run (its id), unless a run of its id is there, running or not."""
        ...

    def look(self, run: str) -> dict[str, Any] | None:
        """The run as `soda fleet status --json` shows it (`status`, `history`,
        `approval`), or None when there is no such run."""
        ...

    def record(self, described: dict[str, Any]) -> commands.RunRecord:
        """What a verdict is checked against: the run as `look` described it."""
        ...

    def send(self, run: str, item: HumanInput, key: str) -> bool:
        """Signal `item` (the run drops a second of `key`); False: the run ended."""
        ...


def poll(tracker: Tracker, config: Config, db: Database, fleet: Fleet, say: Printer) -> Synced:
    """Read the tracker and move each issue's fleet run along (see the module):
    the daemon's poll and `soda issues sync` both. A fleet that does not answer
    is said in one line and tried again at the next poll."""
    return FleetPoll(tracker, config, db, fleet, say).run()


class FleetPoll:
    """One poll of the tracker in fleet mode; the runs' memos read once each."""

    def __init__(
        self, tracker: Tracker, config: Config, db: Database, fleet: Fleet, say: Printer
    ) -> None:
        self.tracker, self.config, self.db, self.fleet, self.say = tracker, config, db, fleet, say
        self.looks: dict[str, dict[str, Any] | None] = {}
        self.told: set[str] = set()
        """Runs sent an input by this poll: their memos may not show it yet."""

    def run(self) -> Synced:
        done = Synced([], [], 0)
        try:
            done = sync(self.tracker, self.config, self.db, self._read)
            for item in rows.items(self.db):
                self._move(item)
        except TransientError as exc:  # what was done is recorded; the rest waits
            self.say(f"tracker: the fleet did not answer ({exc}); again at the next poll")
        return done

    # --- reading --------------------------------------------------------------------

    def look(self, run: str, again: bool = False) -> dict[str, Any] | None:
        if again or run not in self.looks:
            self.looks[run] = self.fleet.look(run)
        return self.looks[run]

    def _read(self, number: int, who: str, text: str) -> HumanInput:
        """How a writer's comment on issue `number` becomes an input: checked
        against its run's memo (a `/soda approve` names the plan that waits there)."""
        run = fleet_rows.run_of(self.db, number)
        described = self.look(run) if run is not None else None  # only when one is read
        record = self.fleet.record(described) if described is not None else NoRun()
        by = commands.Provenance(commands.Face.TRACKER, who)
        return commands.slash(record, by, text).item

    # --- one issue ------------------------------------------------------------------

    def _move(self, item: rows.TrackerItem) -> None:
        run = fleet_rows.run_of(self.db, item.number)
        if item.state == "queued" and item.spec is not None:
            if run is None and item.number in self._ready():
                run = self._start(item)
            if run is not None:
                self._running(item, run)
                item = rows.item(self.db, item.number) or item
        if run is None:
            return
        if item.state in ("running", "stuck", "halted"):
            self._tell(item, run)
            item = rows.item(self.db, item.number) or item
        if item.state == "cancelled":
            self._cancel(item, run)
        elif item.state in ("running", "stuck", "halted"):
            self._follow(item, run)

    def _ready(self) -> set[int]:
        """The queued issues whose "Depends on #M" are done."""
        return {item.number for item in ready(self.db, self.config.tracker.priority)}

    def _start(self, item: rows.TrackerItem) -> str:
        """Its run's id written first, then the run started (at most once)."""
        assert item.spec is not None
        run = self.fleet.run_id(repo_url(self.config), item.spec)
        fleet_rows.save_run(self.db, item.number, run)
        self._start_run(item, run)
        return run

    def _start_run(self, item: rows.TrackerItem, run: str) -> None:
        assert item.spec is not None
        spec = (self.config.root / item.spec).read_text(encoding="utf-8")
        toml = (self.config.root / CONFIG_NAME).read_text(encoding="utf-8")
        self.fleet.start(
            repo_url(self.config), item.spec, spec, toml, self.config.loop.max_iterations
        )
        self.looks.pop(run, None)
        self.say(f"tracker: issue #{item.number} started in the fleet as {run}")

    def _running(self, item: rows.TrackerItem, run: str) -> None:
        """A queued issue whose run id is written: its run started (again after a
        kill -9 came before), the issue running, its start comment, its thread."""
        described = self.look(run)
        if described is None:  # the id was written, the run never started
            self._start_run(item, run)
        elif ended(described):
            # A writer replied to an issue whose run has ended: the fleet does not
            # start an issue's run twice. The reply is kept, and said to be unsent.
            read_thread(self.tracker, self.config, self.db, item.number, self._read)
            for unsent in fleet_rows.unsent(self.db, item.number):
                fleet_rows.mark_sent(self.db, unsent.id, f"not sent: fleet run {run} has ended")
            ending = state_of(described)
            state = ending.state if ending is not None else "halted"
            rows.set_state(self.db, item.number, state, f"its fleet run {run} has ended")
            return
        rows.set_state(self.db, item.number, "running", f"running in the fleet as {run}")
        write_back(self.tracker, self.db, item.number, "start", start_text(item, run))
        # Its thread now, so the run hears what was said while the issue waited.
        read_thread(self.tracker, self.config, self.db, item.number, self._read)

    def _tell(self, item: rows.TrackerItem, run: str) -> None:
        """The writers' inputs read from the thread, sent to the run (each once:
        a signal keyed by its comment); `/soda stop` cancels the issue."""
        write_back(self.tracker, self.db, item.number, "start", start_text(item, run))
        for unsent in fleet_rows.unsent(self.db, item.number):
            said = HumanInput.model_validate_json(unsent.payload_json)
            if said.kind == Control.STOP.value:
                why = f"stopped: /soda stop ({unsent.source})"
                rows.set_state(self.db, item.number, "cancelled", why)
                fleet_rows.mark_sent(self.db, unsent.id, "the issue is cancelled; its run stops")
                return
            sent = self.fleet.send(run, said, unsent.source)
            fleet_rows.mark_sent(
                self.db, unsent.id,
                f"sent to fleet run {run}" if sent else f"not sent: fleet run {run} has ended",
            )  # fmt: skip
            self.looks.pop(run, None)
            self.told.add(run)

    def _cancel(self, item: rows.TrackerItem, run: str) -> None:
        """A cancelled issue that had started: its run stopped, the issue told once."""
        if not rows.written(self.db, item.number, "start"):
            return  # it never started: nothing to stop, nothing to say
        if rows.written(self.db, item.number, "cancelled"):
            return
        described = self.look(run)
        if described is not None and not ended(described):
            stop = commands.control(commands.Provenance(commands.Face.TRACKER), Control.STOP)
            self.fleet.send(run, stop.item, source_of(item.number, "cancel"))
        why = item.last_word or "cancelled"
        text = f"soda stopped work on this issue ({why}); its fleet run {run} stops."
        write_back(self.tracker, self.db, item.number, "cancelled", text)
        self.say(f"tracker: issue #{item.number} {why}")

    def _follow(self, item: rows.TrackerItem, run: str) -> None:
        """What the run's memo owes the issue: its merges, its ending, its state."""
        described = self.look(run)
        if described is None:
            return
        branch = item.branch or ""
        for row in described.get("history") or []:
            if row.get("merged_commit"):
                number = int(row["number"])
                text = told.merged(number, str(row["merged_commit"]), branch)
                write_back(self.tracker, self.db, item.number, f"merged-{number}", text)
        ending = state_of(described)
        if ending is None:
            if item.state != "running":  # a writer's answer let the run go on
                rows.set_state(self.db, item.number, "running", f"running in the fleet as {run}")
            return
        state, reason = ending.state, ending.reason
        if state in ("stuck", "halted") and run in self.told:
            return  # it was just answered: its memo says so at the next poll
        if state == "cancelled":
            rows.set_state(self.db, item.number, "cancelled", f"stopped: fleet run {run}")
            self._cancel(rows.item(self.db, item.number) or item, run)
            return
        pr = self._pull(branch) if state == "done" else None
        event, text = ending_text(state, ending.number, reason, described, branch, pr)
        if write_back(self.tracker, self.db, item.number, event, text) or item.state != state:
            self.say(f"tracker: issue #{item.number} {state}")
        rows.set_state(self.db, item.number, state, f"{state}: {reason}"[:200], pr)

    def _pull(self, branch: str) -> int | None:
        """The pull request of the issue's branch (its run's worker opened it)."""
        pulls = connect(self.config, self.db, branch)
        if pulls is None:
            return None
        found = pulls.forge.find_pull(branch, self.config.project.base_branch)
        return found.number if found is not None else None


def repo_url(config: Config) -> str:
    """What the fleet's workers clone: the URL of `[forge] remote` (a path made
    absolute)."""
    url = remote_url(config.root, config.forge.remote)
    local = config.root / url
    return str(local.resolve()) if "://" not in url and ":" not in url and local.exists() else url


class IssueFleet:
    """The tracker's queue in fleet mode, as the daemon polls it (the daemon's
    `IssueQueue` in shape): nothing runs here, so every look after the poll is
    idle until the next."""

    def __init__(self, live: LiveConfig, db: Database, fleet: Fleet, say: Printer) -> None:
        self.live, self.db, self.fleet, self.say = live, db, fleet, say
        self.tracker = connect_tracker(live.current, db)
        self.last_poll = float("-inf")

    def poll(self, force: bool = False) -> Synced | None:
        config = self.live.current
        if not force and time.monotonic() - self.last_poll < config.tracker.poll_seconds:
            return None
        self.last_poll = time.monotonic()
        return poll(self.tracker, config, self.db, self.fleet, self.say)

    def news(self, done: Synced | None) -> bool:
        return False  # the runs are the workers'; the daemon has nothing to step

    def work(self) -> Run | None:
        return None

    def after(self, step: StepReport) -> bool:
        return False

    def settled(self) -> bool:
        return False

    def stop(self, source: str | None, why: str) -> bool:
        """A `/soda stop` the poll did not take (it takes each as it reads it)."""
        number = issue_of(source)
        if number is None:
            return False
        rows.set_state(self.db, number, "cancelled", f"stopped: {why}")
        return True

    def reload(self, config: Config) -> None:
        self.tracker = connect_tracker(config, self.db)

    def finish(self, status: RunStatus, reason: str) -> None:
        """Nothing is held here: the runs go on in the fleet."""
