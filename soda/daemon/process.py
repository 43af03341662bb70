"""The long-running soda: one instance per repository, woken by files, driven by ticks.

    soda start  -> spawns `soda daemon-run` detached (own session, log in state/logs/)
                   and returns once it wrote state/daemon.ready (or its reason in
                   state/daemon.error)
    daemon-run  -> lock, recover, preflight (provider key, jail), ready; then:
                   tick (APScheduler) or wake (watchfiles) -> ingest the inbox ->
                   control inputs -> (idle) the pull request read, a plan past its
                   deadline -> a free wake or one iteration (soda.loop.host)
    soda stop   -> SIGTERM; the daemon stops at the next safe point and exits 0;
                   after --timeout a second SIGTERM stops it at once

With `[tracker] enabled` the work is the tracker's queue (soda.daemon.issues):
each look reads the tracker when `poll_seconds` have passed, and the run stepped
is the issue in progress, one issue's run at a time, each ending moving on to
the next.

What follows an iteration is the daemon's row of soda.loop.policy: after
CONTINUE the daemon iterates again at once; after DONE, STUCK or HALT it closes
the run, runs `notify_command` and idles: no model calls and no busy loop, until
a file lands in the inbox or the spec changes. Each wake with something new starts a run (so the
per-run budget and iteration count start again); a wake with nothing new is a
`wake.skipped` event. A transient failure is retried on a later tick. A crash is
recorded as one (`crashed`, with its error), never as a clean stop. SIGHUP reloads
soda.toml. The instance lock (`state/soda.lock`, flock) is what makes a second
start refuse; `state/soda.pid` only says who holds it.
"""

from __future__ import annotations

import os
import signal
import threading
import traceback
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from types import FrameType

from apscheduler.schedulers.background import BackgroundScheduler

from soda.config import Config, LiveConfig, load
from soda.contracts.outcomes import RunStatus
from soda.daemon.flags import SETTLE_SECONDS, Flags, settle_delay, take
from soda.daemon.issue_fleet import Fleet, IssueFleet
from soda.daemon.issues import IssueQueue
from soda.daemon.parts import LOG_NAME, keep_watching
from soda.errors import SodaError, UserError
from soda.events import Events, notify
from soda.human.routing import Control
from soda.human.write import inbox_dir
from soda.llm.providers import check_provider
from soda.loop.host import Run, open_run
from soda.loop.policy import Host, Next, after
from soda.system.lifecycle import publish_wake, stop_signals, write_error, write_ready
from soda.system.lock import release_lock
from soda.system.windows import in_window, next_open, parse_windows

__all__ = ["LOG_NAME", "SETTLE_SECONDS", "Daemon", "Flags"]

# --- the daemon process -------------------------------------------------------


class Daemon:
    """The process behind `soda start`. `run()` returns the exit code.

    Threads: the loop runs on the main thread (`run` -> `_serve` -> `_tick`), and
    the signal handlers run there too, between two of its steps; the tick
    (APScheduler), the watcher and settle timers have threads of their own. What
    those tell the loop goes through `flags`. The rest is the loop thread's own
    and plain: `idle`, `paused`, `resumed` and `windows`. `loop` is set once,
    by the preflight, before any other thread starts; `live.current` is swapped
    by the loop (a reload) and read by every thread as one reference.
    """

    def __init__(self, config_path: Path, fleet: Callable[[Config], Fleet] | None = None) -> None:
        self.config_path = config_path
        self.fleet = fleet
        """How to reach the fleet `[tracker] fleet` names (the CLI hands it in)."""
        self.live = LiveConfig(check_provider(load(config_path)))
        """The config this daemon, its session, runner and recorder all read."""
        self.flags = Flags()
        """What other threads and the signal handlers tell the loop (see Flags)."""
        self.loop: Run | None = None
        """The loop's run the preflight opened (None until then)."""
        # The loop thread's own state: only it reads or writes these.
        self.windows = parse_windows(self.config.daemon.windows)
        """The working windows ([daemon] windows), parsed; a reload replaces them."""
        self.idle = False
        """A run ended (DONE, STUCK, HALT) or a wake had nothing new: no iteration
        until a person writes or the spec changes."""
        self.paused = False
        """A `pause` came: no iteration until a `resume`."""
        self.resumed = False
        """A `resume` came: the next wake iterates even if nothing else changed."""
        self.issues: IssueQueue | IssueFleet | None = None
        """`[tracker] enabled`: the work is the tracker's queue (soda.daemon.issues),
        one issue's run at a time, not the project's spec; with `[tracker] fleet`,
        each issue a fleet run (soda.daemon.issue_fleet), this daemon its poll."""

    @property
    def config(self) -> Config:
        return self.live.current

    @property
    def wake(self) -> threading.Event:
        """`flags.wake`: set it to make the loop look for work now."""
        return self.flags.wake

    @property
    def stopping(self) -> threading.Event:
        """`flags.stop`: set once the daemon stops (at the next safe point)."""
        return self.flags.stop

    def say(self, line: str) -> None:
        print(f"{datetime.now().isoformat(timespec='seconds')} {line}", flush=True)

    def run(self) -> int:
        """Preflight, then serve until stopped. The exit code: 0 stopped (at a safe
        point or at once), 2 a person must fix something (said in state/daemon.error
        when it happened before the daemon was ready), 1 a crash (recorded)."""
        state = self.config.state_dir
        signal.signal(signal.SIGHUP, self._reload_soon)
        with stop_signals(self._stop_soon):
            try:
                run = self._preflight()
            except Exception as exc:
                reason = str(exc) if isinstance(exc, SodaError) else f"{type(exc).__name__}: {exc}"
                write_error(state, reason)
                release_lock(state)
                self.say(f"soda daemon did not start: {reason}")
                return exc.exit_code if isinstance(exc, SodaError) else 1
            write_ready(state)
            return self._serve(run)

    def _preflight(self) -> Run:
        """Lock, recovery, config, the provider's key and the jail: all checked
        before the daemon says it is ready. The session stops when the daemon does
        (it shares `flags.stop`), a stop that came during the preflight included."""
        run = open_run(self.live, start=False, stopping=self.flags.stop)
        self.loop = run
        run.check_jail()
        tracker = self.config.tracker
        if tracker.enabled and tracker.fleet is not None:
            if self.fleet is None:
                raise UserError("soda.toml: tracker.fleet: this soda cannot reach a fleet")
            self.issues = IssueFleet(self.live, run.db, self.fleet(self.config), self.say)
        elif tracker.enabled:
            self.issues = IssueQueue(
                self.live, run.db, self.flags.stop, self.say, run.events, run.model
            )
        return run

    def _serve(self, run: Run) -> int:
        scheduler = BackgroundScheduler()
        scheduler.add_job(
            self.flags.wake.set,
            "interval",
            seconds=self.config.daemon.tick_seconds,
            coalesce=True,
            max_instances=1,
            misfire_grace_time=30,
            id="tick",
        )
        scheduler.start()
        watcher = threading.Thread(target=self._watch, name="soda-watch", daemon=True)
        watcher.start()
        self.say(f"soda daemon up (pid {os.getpid()}), milestone {run.milestone.branch}")
        status, reason, code = RunStatus.STOPPED, "daemon stopped", 0
        try:
            while not self.flags.stop.is_set():
                self._tick(run)
                publish_wake(self.config.state_dir, self._next_wake())
                self.flags.wake.wait()
                self.flags.wake.clear()
        except KeyboardInterrupt:
            status, reason = RunStatus.INTERRUPTED, "stopped at once by a second signal"
        except UserError as exc:
            status, reason, code = RunStatus.ERROR, str(exc), exc.exit_code
            self.say(f"stopped: {exc}")
        except Exception as exc:  # a bug: recorded as a crash with its error, never "stopped"
            status, reason, code = RunStatus.CRASHED, f"{type(exc).__name__}: {exc}", 1
            self.say(f"soda daemon crashed: {reason}\n{traceback.format_exc()}")
            run.events.emit("daemon.crashed", {"error": reason})
        finally:
            self.flags.stop.set()
            publish_wake(self.config.state_dir, None)
            scheduler.shutdown(wait=False)
            if self.issues is not None:
                self.issues.finish(status, reason)
            run.finish(status, reason)  # once: a run closed already stays as it was
            release_lock(self.config.state_dir)
            self.say(f"soda daemon {status}")
        return code

    def _tick(self, run: Run, now: datetime | None = None) -> None:
        """One look for work, on the loop thread: take what the flags say (a reload,
        a spec change), ingest the inbox, apply control inputs, then, unless
        stopping, paused or idle and only inside a working window, a free wake or
        one iteration, and what the daemon's policy says follows it. `now` is the
        moment checked against the windows (the clock's, unless a test gives one)."""
        if take(self.flags.reload):
            self._reload(run)
        report = run.take_inputs(settle_seconds=SETTLE_SECONDS)
        if report.skipped:  # still being written: look again the moment it has settled
            timer = threading.Timer(
                settle_delay(self.config.state_dir, report.skipped), self.flags.wake.set
            )
            timer.daemon = True
            timer.start()
        spec_changed = take(self.flags.spec_changed)
        if report.accepted or spec_changed:
            self.idle = False
        if self.issues is not None and self.issues.news(self.issues.poll()):
            self.idle = False  # the tracker's news: an issue queued, answered, cancelled
        self._apply_control(run)
        if self.issues is not None and not (self.flags.stop.is_set() or self.paused):
            if not in_window(self.windows, now or datetime.now()):
                return
            work = self.issues.work()  # the issue in progress, or the next one's run
            self.idle = work is None
            if work is None:
                return
            run = work
        if self.idle and not self.paused and run.look(self.say):
            self.idle = False  # the pull request's news, or a suspended plan's time is up
        if self.flags.stop.is_set() or self.paused or self.idle:
            return
        if not in_window(self.windows, now or datetime.now()):
            return
        skip = None if self.resumed else run.nothing_new()
        self.resumed = False
        if skip is not None and self.issues is not None and self.issues.settled():
            self.flags.wake.set()  # the issue had ended before a restart: the next one
            return
        if skip is not None:  # a free wake: no run, no iteration, no model call
            run.events.emit("wake.skipped", {"reason": skip})
            self.say(f"wake skipped: {skip}")
            self.idle = True
            return
        step = run.step(self.say)  # a run is recorded per wake: its budget and count from 0
        then = after(Host.DAEMON, step.ending)
        if then.close_run:
            run.finish(step.ending.run_status, step.reason)
        if self.issues is not None and self.issues.after(step):
            then = replace(then, next=Next.AGAIN)  # the issue ended: the next one at once
        if then.next is Next.AGAIN:
            self.flags.wake.set()  # more work: go again without waiting for a tick
        elif then.next is Next.IDLE:
            self.idle = True
            self.say(f"{step.ending.name}: {step.reason}; idle until a person writes")
        elif then.next is Next.END:
            self.flags.stop.set()
        if then.notify:
            notify(self.config, step.ending.name, step.number, step.reason, run.events)

    def _next_wake(self, now: datetime | None = None) -> str | None:
        """When the daemon will next look for work, for `soda status`."""
        if self.flags.stop.is_set():
            return None
        if self.paused:
            return "when resumed (`soda resume`)"
        if self.idle and self.issues is not None:
            return f"at the next read of the tracker, within {self._poll_seconds():g} s"
        if self.idle:
            if self.loop is not None and self.loop.has_pull_request:
                return (
                    "when a person writes (soda tell, state/inbox/, the spec, or the pull request)"
                )
            return "when a person writes (soda tell, state/inbox/, or the spec)"
        if self.flags.wake.is_set():
            return "now (more work)"
        now = (now or datetime.now()).astimezone()
        if not in_window(self.windows, now):
            first = next_open(self.windows, now)
            return f"at {first.isoformat(timespec='minutes')} (daemon.windows)" if first else None
        return f"at the next tick, within {self.config.daemon.tick_seconds:g} s"

    def _poll_seconds(self) -> float:
        tracker = self.config.tracker.poll_seconds
        return max(tracker, self.config.daemon.tick_seconds)

    def _apply_control(self, run: Run) -> None:
        for action in run.take_controls():
            kind = action.kind
            source = action.source_file or ""
            if kind == Control.PAUSE:
                self.paused = True
            elif kind == Control.RESUME:  # a person asks for work: never a free wake
                self.paused, self.idle, self.resumed = False, False, True
            elif kind == Control.STOP and source.startswith("tracker:"):
                if self.issues is not None:  # an issue's `/soda stop` stops that issue
                    self.issues.stop(source, f"/soda stop ({source})")
                continue  # said by the queue; the daemon goes on
            elif kind == Control.STOP:
                self.flags.stop.set()
            self.say(f"control: {action.response}")

    def _reload(self, run: Run) -> None:
        try:
            config = check_provider(load(self.config_path))
            run.check_startable(config)
            windows = parse_windows(config.daemon.windows)
        except SodaError as exc:
            run.events.emit("config.reload_failed", {"error": str(exc)})
            self.say(f"SIGHUP: kept the old config: {exc}")
            return
        # One swap: the session, its agent runner and call recorder read the config
        # through self.live, and the session makes its jail again from the new
        # [sandbox] at the next use. The windows are this daemon's own parse of
        # [daemon] windows, checked above with the file before anything changed.
        # (The model keeps the [model] settings it was built with, as it always
        # has: another provider or endpoint takes a restart.)
        self.live.current, self.windows = config, windows
        if self.issues is not None:
            self.issues.reload(config)
        run.events.emit("config.reloaded", {})
        self.say("SIGHUP: soda.toml reloaded")

    def _watch(self) -> None:
        """Wake the loop the moment something lands in the inbox or the spec changes.

        The watch cannot die silently: an error (e.g. a file name that is not
        UTF-8, the inbox removed) is logged and recorded as `watcher.restarted`,
        and the watch starts again after a short backoff, until the daemon stops.
        """
        keep_watching(self._watch_once, self.flags.stop, self._watch_failed, self.flags.wake.set)

    def _watch_once(self) -> None:
        import watchfiles

        inbox = inbox_dir(self.config.state_dir)  # watched for wakes; soda.human reads it
        inbox.mkdir(parents=True, exist_ok=True)
        inbox = inbox.resolve()
        spec = self.config.spec_path.resolve()
        watched = (inbox, spec.parent)

        def relevant(change: watchfiles.Change, path: str) -> bool:
            p = Path(path)
            if change == watchfiles.Change.deleted and p in watched:
                return True  # the watch is deaf from now on: see below
            if p.name.startswith(".") or p.name.endswith(("~", ".swp", ".tmp")):
                return False
            return p.resolve() == spec or p.parent.resolve() == inbox

        for changes in watchfiles.watch(
            inbox,
            spec.parent,
            watch_filter=relevant,
            stop_event=self.flags.stop,
            debounce=50,
            step=20,
            rust_timeout=500,
            yield_on_timeout=False,
            recursive=False,  # soda's own moves into processed/ and rejected/ are no news
        ):
            if any(Path(path).resolve() == spec for _, path in changes):
                self.flags.spec_changed.set()
            self.flags.wake.set()
            deleted = watchfiles.Change.deleted
            gone = [path for change, path in changes if change == deleted and Path(path) in watched]
            if gone:
                raise FileNotFoundError(f"the watched directory {gone[0]} was removed")

    def _watch_failed(self, error: BaseException, backoff: float) -> None:
        text = " ".join(f"{type(error).__name__}: {error}".split())
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
        self.say(f"watcher failed ({text}); restarting in {backoff:g} s")
        self.flags.wake.set()  # what broke the watch may be a file that landed: look now
        try:  # the watcher's own connection: the loop's may be mid-transaction
            from soda.store import open_db

            db = open_db(self.config.db_path)
            try:
                loop = self.loop  # set before this thread started
                run_id = loop.events.run_id if loop is not None else None
                log = self.config.state_dir / "logs" / "events.jsonl"
                events = Events(db, log).for_run(run_id)
                events.emit("watcher.restarted", {"error": text, "backoff_seconds": backoff})
            finally:
                db.conn.close()
        except Exception as exc:  # the log line above is the record
            self.say(f"watcher: could not record the event: {exc}")

    def _stop_soon(self) -> None:
        """The first SIGTERM/SIGINT: stop at the next safe point (soda.system.lifecycle).
        A signal handler: it only sets flags (the session reads `stop` too)."""
        self.flags.stop.set()
        self.flags.wake.set()

    def _reload_soon(self, signum: int, frame: FrameType | None) -> None:
        """SIGHUP: the loop reloads soda.toml at its next look. Only sets flags."""
        self.flags.reload.set()
        self.flags.wake.set()
