"""The long-running soda: one instance per repository, woken by files, driven by ticks.

    soda start  -> spawns `soda daemon-run` detached (own session, log in state/logs/)
    daemon-run  -> lock, recover, then: tick (APScheduler) or wake (watchfiles)
                   -> ingest the inbox -> control inputs -> maybe one iteration
    soda stop   -> SIGTERM; the daemon stops at the next safe point and exits 0

After CONTINUE the daemon iterates again at once. After DONE, STUCK or HALT it
idles: no model calls and no busy loop, until a file lands in the inbox or the
spec changes. A transient failure is retried on a later tick. SIGHUP reloads
soda.toml. The instance lock (`state/soda.lock`, flock) is what makes a second
start refuse; `state/soda.pid` only says who holds it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler

from soda.config import Config, load
from soda.daemon_parts import (
    in_window,
    keep_watching,
    notify,
    parse_windows,
    rotate_log,
)
from soda.errors import SodaError, UserError
from soda.events import Events
from soda.jail import Jail
from soda.lock import release_lock, running_pid
from soda.loop import Ending, run_iteration
from soda.recovery import pid_alive

LOG_NAME = "soda.log"
SETTLE_SECONDS = 0.2
"""A file younger than this may still be open in an editor; ingest waits for it."""

# --- start / stop ----------------------------------------------------


def start(config: Config, wait_seconds: float = 10.0) -> int:
    """Launch the daemon detached and return its pid once it holds the lock."""
    state = config.state_dir
    holder = running_pid(state)
    if holder:
        raise UserError(f"soda is already running here (pid {holder}); `soda stop` ends it")
    log_path = state / "logs" / LOG_NAME
    rotate_log(log_path)
    with log_path.open("ab") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", "soda", "-C", str(config.root), "daemon-run"],
            cwd=config.root,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + wait_seconds
    while time.monotonic() < deadline:
        if child.poll() is not None:
            break
        if running_pid(state) == child.pid:
            return child.pid
        time.sleep(0.05)
    tail = log_path.read_text(errors="replace")[-2000:] if log_path.exists() else ""
    if child.poll() is None:
        child.terminate()
    raise SodaError(f"the daemon did not come up; end of {log_path}:\n{tail.strip()}")


def stop(config: Config, wait_seconds: float = 15.0) -> int | None:
    """SIGTERM the daemon and wait for it to exit; its pid, or None if none ran."""
    pid = running_pid(config.state_dir)
    if pid is None:
        return None
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait_seconds
    while time.monotonic() < deadline:
        if running_pid(config.state_dir) is None and not pid_alive(pid):
            return pid
        _reap(pid)
        time.sleep(0.05)
    raise SodaError(f"soda (pid {pid}) did not stop within {wait_seconds:.0f}s")


def _reap(pid: int) -> None:
    """Collect the daemon if we are its parent (tests start it from this process)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


# --- the daemon process ---------------------------------------------------------


class Daemon:
    """The process behind `soda start`. `run()` returns the exit code."""

    def __init__(self, config_path: Path) -> None:
        self.config_path = config_path
        self.config = load(config_path)
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self.reload_requested = False
        self.spec_changed = False
        self.idle = False
        self.paused = False
        self.signals = 0
        self.windows = parse_windows(self.config.daemon.windows)

    def say(self, line: str) -> None:
        print(f"{datetime.now().isoformat(timespec='seconds')} {line}", flush=True)

    def run(self) -> int:
        from soda.session import Session

        self._install_signals()
        session = Session.open(self.config)
        self.session = session
        scheduler = BackgroundScheduler()
        scheduler.add_job(
            self.wake.set,
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
        self.say(f"soda daemon up (pid {os.getpid()}), milestone {session.milestone.branch}")
        try:
            while not self.stopping.is_set():
                self._tick(session)
                self.wake.wait()
                self.wake.clear()
        finally:
            scheduler.shutdown(wait=False)
            session.finish_run("stopped", "daemon stopped")
            release_lock(self.config.state_dir)
            self.say("soda daemon stopped")
        return 0

    def _tick(self, session: Any) -> None:
        if self.reload_requested:
            self._reload(session)
        report = session.human.ingest(settle_seconds=SETTLE_SECONDS)
        if report.skipped:  # still being written: look again once it has settled
            threading.Timer(SETTLE_SECONDS + 0.05, self.wake.set).start()
        if report.accepted or self.spec_changed:
            self.idle = False
            self.spec_changed = False
        self._apply_control(session)
        if self.stopping.is_set() or self.paused or self.idle:
            return
        if not in_window(self.windows, datetime.now()):
            return
        result = run_iteration(session, self.say)
        if result.ending is Ending.CONTINUE:
            self.wake.set()  # more work: go again without waiting for a tick
        elif result.ending in (Ending.DONE, Ending.STUCK, Ending.HALT):
            self.idle = True
            self.say(f"{result.ending.name}: {result.reason}; idle until a person writes")
            notify(self.config, result.ending.name, result.number, result.reason, session.events)
        elif result.ending is Ending.INTERRUPTED:
            self.stopping.set()

    def _apply_control(self, session: Any) -> None:
        for action in session.human.take_control_while_idle(session.next_iteration_number()):
            kind = action.kind
            self.paused = {"pause": True, "resume": False}.get(kind, self.paused)
            if kind == "stop":
                self.stopping.set()
            if kind == "resume":
                self.idle = False
            self.say(f"control: {action.response}")

    def _reload(self, session: Any) -> None:
        self.reload_requested = False
        try:
            config = load(self.config_path)
            windows = parse_windows(config.daemon.windows)
        except SodaError as exc:
            session.events.emit("config.reload_failed", {"error": str(exc)})
            self.say(f"SIGHUP: kept the old config: {exc}")
            return
        self.config, self.windows = config, windows
        session.config = config
        session.runner.config = config
        session.recorder.config = config
        session.jail = Jail.for_config(config, Path(session.repo.git_dir))  # [sandbox] changes
        session.events.emit("config.reloaded", {})
        self.say("SIGHUP: soda.toml reloaded")

    def _watch(self) -> None:
        """Wake the loop the moment something lands in the inbox or the spec changes.

        The watch cannot die silently: an error (e.g. a file name that is not
        UTF-8, the inbox removed) is logged and recorded as `watcher.restarted`,
        and the watch starts again after a short backoff, until the daemon stops.
        """
        keep_watching(self._watch_once, self.stopping, self._watch_failed, self.wake.set)

    def _watch_once(self) -> None:
        import watchfiles

        from soda.human.write import inbox_dir

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
            stop_event=self.stopping,
            debounce=50,
            step=20,
            rust_timeout=500,
            yield_on_timeout=False,
            recursive=False,  # soda's own moves into processed/ and rejected/ are no news
        ):
            if any(Path(path).resolve() == spec for _, path in changes):
                self.spec_changed = True
            self.wake.set()
            deleted = watchfiles.Change.deleted
            gone = [path for change, path in changes if change == deleted and Path(path) in watched]
            if gone:
                raise FileNotFoundError(f"the watched directory {gone[0]} was removed")

    def _watch_failed(self, error: BaseException, backoff: float) -> None:
        text = " ".join(f"{type(error).__name__}: {error}".split())
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
        self.say(f"watcher failed ({text}); restarting in {backoff:g} s")
        self.wake.set()  # what broke the watch may be a file that landed: look now
        try:  # the watcher's own connection: the loop's may be mid-transaction
            from soda.store import open_db

            db = open_db(self.config.db_path)
            try:
                events = Events(db, self.config.state_dir / "logs" / "events.jsonl")
                session = getattr(self, "session", None)
                events.run_id = session.events.run_id if session is not None else None
                events.emit("watcher.restarted", {"error": text, "backoff_seconds": backoff})
            finally:
                db.conn.close()
        except Exception as exc:  # the log line above is the record
            self.say(f"watcher: could not record the event: {exc}")

    def _install_signals(self) -> None:
        def stop(signum: int, frame: object) -> None:
            self.signals += 1
            if self.signals > 1:
                raise KeyboardInterrupt  # a second signal: stop now
            self.stopping.set()
            session = getattr(self, "session", None)
            if session is not None:
                session.stop_requested = True
            self.wake.set()

        def reload(signum: int, frame: object) -> None:
            self.reload_requested = True
            self.wake.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGHUP, reload)
