"""The daemon's work from the issue tracker (`[tracker] enabled`): one issue at a
time, each a run on its own milestone.

    poll    every `[tracker] poll_seconds`, at the daemon's tick:
            soda.forge.tracker.sync (conditional requests: an unchanged tracker
            costs no rate limit after the first read, and never a model call);
            then every done issue's pull request that waits for its checks is
            settled (soda.forge.done: ready or merged when green, the issue
            queued again when a check failed), whatever issue is being worked
    work    the run to step: the issue in progress, or the next queued one
            (soda.forge.tracker.next_item), opened through soda.loop.host with the
            issue's spec, so its milestone is `soda/issue-N`; its start comment
            first
    after   after each step: a short comment per merged iteration, and at DONE,
            STUCK or HALT the last comment (the pull request; why and what a
            person can do, with the question asked; the halt) and the issue's
            state; the next issue follows at once
    stop    a writer's `/soda stop`, or a label a writer removed: the issue is
            cancelled and its run ends at this safe point (between iterations)

Nothing is written twice, or lost, across a kill -9: every comment goes through
soda.forge.thread.write_back (a hidden event marker on the thread), and what is
owed is read from the database each time (the merges recorded on the issue's
branch, its last ending), never from what this process remembers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace

from sqlite_utils import Database

from soda.config import Config, LiveConfig
from soda.contracts import HumanInput
from soda.contracts.outcomes import Ending, RunStatus
from soda.daemon import told
from soda.events import Events
from soda.forge import connect_tracker
from soda.forge.done import settle_done
from soda.forge.pulls import Settled
from soda.forge.thread import issue_of
from soda.forge.tracker import Reader, Synced, next_item, read_thread, sync, write_back
from soda.human import commands
from soda.human.checks import DatabaseRecord
from soda.llm.base import Model
from soda.loop.host import Run, StepReport, open_run
from soda.store import forge as pulls
from soda.store import questions
from soda.store import tracker as rows
from soda.store.questions import Question

Printer = Callable[[str], None]
ENDS = {Ending.DONE: "done", Ending.STUCK: "stuck", Ending.HALT: "halted"}
"""How a run's ending leaves its issue."""
DECIDED = {"DONE": Ending.DONE, "STUCK": Ending.STUCK, "HALT": Ending.HALT}
"""An iteration's recorded decision that ended its run."""


def reader(db: Database, config: Config) -> Reader:
    """How a writer's comment on an issue becomes an input: soda.human.commands
    builds it, with the comment as its provenance. While the issue's run waits
    for a person's answer, the comment answers its oldest open question that no
    answer targets yet (one reply per question); else it is a correction."""
    record = DatabaseRecord(db, config)

    def read(number: int, who: str, text: str) -> HumanInput:
        by = commands.Provenance(commands.Face.TRACKER, who)
        waiting = asked(db, number, unanswered_only=True)
        return commands.slash(record, by, text, waiting[0].id if waiting else None).item

    return read


def asked(db: Database, number: int, unanswered_only: bool = False) -> list[Question]:
    """The open questions agents asked on issue `number`'s milestone, oldest
    first (`unanswered_only`: those no answer waiting to be recorded targets)."""
    item = rows.item(db, number)
    if item is None or item.branch is None:
        return []
    if unanswered_only:
        return questions.unanswered(db, item.branch)
    return questions.open_questions(db, item.branch)


def for_issue(config: Config, spec: str) -> Config:
    """`config` working on an issue's spec (and so its milestone `soda/issue-N`)."""
    return config.model_copy(update={"project": config.project.model_copy(update={"spec": spec})})


class IssueQueue:
    """The tracker's queue as the daemon works it, on the daemon's loop thread."""

    def __init__(
        self,
        live: LiveConfig,
        db: Database,
        stopping: threading.Event,
        say: Printer,
        events: Events,
        model: Model | None = None,
    ) -> None:
        self.live = live
        self.db = db
        """The daemon's own connection: the queue's rows live beside the runs."""
        self.stopping = stopping
        self.say = say
        self.model = model
        """The model every issue's run calls (None: each makes `[model]`'s)."""
        self.tracker = connect_tracker(live.current, db)
        self.read = reader(db, live.current)
        self.item: rows.TrackerItem | None = None
        """The issue in progress in this process (its run is `run`)."""
        self.run: Run | None = None
        self.issue_config: LiveConfig | None = None
        self.last_poll = float("-inf")
        self.events = events
        """The daemon's events: where settling a waiting pull request is recorded."""

    # --- reading the tracker ------------------------------------------------------

    def poll(self, force: bool = False) -> Synced | None:
        """Read the tracker when `[tracker] poll_seconds` have passed (or `force`);
        what changed, or None when it was not read."""
        config = self.live.current
        if not force and time.monotonic() - self.last_poll < config.tracker.poll_seconds:
            return None
        self.last_poll = time.monotonic()
        done = sync(self.tracker, config, self.db, self.read)
        failed = []
        for finished in settle_done(config, self.db, self.events):
            self.say(f"tracker: issue #{finished.number}: {finished.word}")
            if finished.outcome is Settled.FAILED:
                failed.append(finished.number)
        done = replace(done, requeued=[*done.requeued, *failed])
        for what, numbers in (
            ("queued", done.queued),
            ("kept as data (not a writer's label)", done.data),
            ("cancelled by a writer", done.cancelled),
            ("queued again (a writer replied)", done.requeued),
        ):
            if numbers:
                self.say(f"tracker: {what}: {', '.join(f'#{n}' for n in numbers)}")
        return done

    def news(self, done: Synced | None) -> bool:
        """The poll brought work: an issue queued, cancelled or answered, or an input."""
        return done is not None and bool(
            done.queued or done.cancelled or done.requeued or done.inputs
        )

    # --- working the queue ------------------------------------------------------------

    def work(self) -> Run | None:
        """The run to step now: the issue in progress (after a restart too), else
        the next queued one, marked running, its start comment written, its run
        opened. A cancelled issue's run ends here first. None: nothing to do."""
        if self.item is not None:
            now = rows.item(self.db, self.item.number)
            if now is not None and now.state == "running":
                return self.run
            self._cancelled(now.last_word if now else None)
        self._owed_cancellations()
        running = [item for item in rows.items(self.db) if item.state == "running"]
        item = running[0] if running else next_item(self.db, self.live.current.tracker.priority)
        if item is None or item.spec is None:
            return None
        if item.state == "queued":
            rows.set_state(self.db, item.number, "running", "running")
        write_back(self.tracker, self.db, item.number, "start", told.start(item.branch, item.spec))
        # Its thread now, so the first iteration reads what was said while it waited.
        read_thread(self.tracker, self.live.current, self.db, item.number, self.read)
        self.issue_config = LiveConfig(for_issue(self.live.current, item.spec))
        self.run = open_run(
            self.issue_config, stopping=self.stopping, start=False, model=self.model
        )
        self.item = item
        self.say(f"tracker: working on issue #{item.number} ({item.branch})")
        return self.run

    def after(self, step: StepReport) -> bool:
        """Write back what `step` owes its issue; True when the issue's run ended
        (DONE, STUCK, HALT: its state marked, the next issue may start)."""
        assert self.item is not None and self.run is not None
        self._merges()
        ending = step.ending
        if ending not in ENDS:
            return False
        self._end(ending, step.reason, step.number)
        return True

    def settled(self) -> bool:
        """A wake with nothing new for the issue in progress: its last iteration
        ended its run (a kill -9 came before the issue was marked). The comments it
        owes are written (once) and it is marked; True when so."""
        if self.item is None or self.item.branch is None:
            return False
        ended = [
            it for it in rows.branch_iterations(self.db, self.item.branch) if it.decision in DECIDED
        ]
        if not ended:
            return False
        last = ended[-1]
        self._merges()
        self._end(DECIDED[str(last.decision)], last.reason or "", last.number)
        return True

    def stop(self, source: str | None, why: str) -> bool:
        """A `/soda stop` read from the thread of the issue in progress: it is
        cancelled, and its run ends at once (this is a safe point); True when so."""
        item = self.item
        if item is None or issue_of(source) != item.number:
            return False
        rows.set_state(self.db, item.number, "cancelled", f"stopped: {why}")
        self._cancelled(f"stopped: {why}")
        return True

    def reload(self, config: Config) -> None:
        """soda.toml was reloaded: the issue's run reads the new one too."""
        if self.issue_config is not None and self.item is not None and self.item.spec:
            self.issue_config.current = for_issue(config, self.item.spec)

    def finish(self, status: RunStatus, reason: str) -> None:
        """The daemon stops: the issue's run record closes (the issue stays running,
        and a restart goes on with it)."""
        if self.run is not None:
            self.run.finish(status, reason)
            self.run.db.conn.close()
        self.run = self.item = None

    # --- what is written back -----------------------------------------------------------

    def _merges(self) -> None:
        """One short comment per iteration that merged on the issue's branch (each
        once: the database says which merged, the thread which were told)."""
        assert self.item is not None and self.item.branch is not None
        for it in rows.branch_iterations(self.db, self.item.branch):
            if it.merged_commit:
                text = told.merged(it.number, it.merged_commit, self.item.branch)
                write_back(self.tracker, self.db, self.item.number, f"merged-{it.number}", text)

    def _end(self, ending: Ending, reason: str, number: int) -> None:
        item = self.item
        assert item is not None and item.branch is not None
        pull = pulls.pull(self.db, item.branch)
        pr = pull.number if pull is not None else None
        waits = pull is not None and pull.done_sha is not None
        if ending is Ending.DONE:
            then = " It is marked ready for review once its checks pass." if waits else ""
            text = told.done(pr, item.branch, then)
            # Told again only after a failed check queued the issue again.
            event = f"done-{number}" if rows.written(self.db, item.number, "done") else "done"
        elif ending is Ending.STUCK:
            waiting = asked(self.db, item.number)
            text = told.stuck(number, reason, _stuck_help(waiting))
            event = f"stuck-{number}"
        else:
            look, reply = "`soda status`, `soda show`", "A reply here queues it again."
            text = told.halted(number, reason, look, reply)
            event = f"halted-{number}"
        write_back(self.tracker, self.db, item.number, event, text)
        state = ENDS[ending]
        word = f"pull request #{pr} waits for its checks" if waits else reason
        rows.set_state(self.db, item.number, state, f"{state}: {word}"[:200], pr)
        self._close(f"issue #{item.number} {state}")
        self.say(f"tracker: issue #{item.number} {state}")

    def _cancelled(self, why: str | None) -> None:
        item = self.item
        assert item is not None
        write_back(self.tracker, self.db, item.number, "cancelled", told.stopped(why))
        self._close(f"issue #{item.number} {why or 'cancelled'}")
        self.say(f"tracker: issue #{item.number} {why or 'cancelled'}")

    def _owed_cancellations(self) -> None:
        """An issue cancelled after it started whose comment a kill -9 cut short
        (its state is written first): said now, once."""
        for item in rows.items(self.db):
            if item.state != "cancelled" or not rows.written(self.db, item.number, "start"):
                continue
            if not rows.written(self.db, item.number, "cancelled"):
                write_back(
                    self.tracker, self.db, item.number, "cancelled", told.stopped(item.last_word)
                )

    def _close(self, reason: str) -> None:
        if self.run is not None:
            self.run.close(reason, keep_lock=True)
        self.run = self.item = self.issue_config = None


def _stuck_help(waiting: list[Question]) -> str:
    """What a person can do for a STUCK issue: reply; with the questions its run
    waits for, each reply answers the oldest one still unanswered."""
    if not waiting:
        return "What a person can do: reply here with a correction; soda takes the issue up again."
    listed = "\n".join(f"- question {q.id}: {q.question}" for q in waiting)
    one = "the question" if len(waiting) == 1 else "the oldest question still unanswered"
    return (
        f"What a person can do: reply here; the reply answers {one} below, the task that"
        f" asked goes on with it, and soda takes the issue up again.\n\n{listed}"
    )
