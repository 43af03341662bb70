"""The one place that writes events: a row in the `events` table and a JSON line
in `state/logs/events.jsonl`, so both SQL and `tail -f` can follow soda; and,
in the same process, the listeners that follow them live (`soda run`'s progress).
`notify` runs the person's `[daemon] notify_command` for the moments that need
them (DONE, STUCK, HALT, a question).

May import: config, errors, store, system.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from soda.config import Config
from soda.store import events as event_rows
from soda.store.db import dumps, now
from soda.store.runs import IterationRef
from soda.system.proc import run as run_command

Listener = Callable[[str, dict[str, Any]], None]
"""Called with an event's kind and data right after it is stored."""


class _Log:
    """The JSON-lines log, kept open between events (opening it for every event
    was a tenth of an iteration's bookkeeping). Each line goes out in one
    `write` to a file opened for appending: it lands whole at the end even with
    another writer at the same time, and once written it is the kernel's (a
    kill of soda right after loses nothing). A log that was moved or deleted
    is opened again at its path."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._id: tuple[int, int] | None = None
        self._lock = threading.Lock()
        weakref.finalize(self, _Log._close, self.__dict__)

    def write(self, line: str) -> None:
        data = (line + "\n").encode("utf-8")
        with self._lock:
            fd = self._open()
            while data:
                data = data[os.write(fd, data) :]

    def _open(self) -> int:
        try:
            st = os.stat(self.path)
            current: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except FileNotFoundError:
            current = None
        if self._fd is not None and current == self._id:
            return self._fd
        self._close(self.__dict__)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
        st = os.fstat(fd)
        self._fd, self._id = fd, (st.st_dev, st.st_ino)
        return fd

    @staticmethod
    def _close(state: dict[str, Any]) -> None:
        fd = state.get("_fd")
        state["_fd"] = None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


class Events:
    """Appends typed events. `kind` is a dotted name such as `act.merged`,
    `provider.retry` or `inbox.rejected`; `data` is any JSON-able mapping.

    An `Events` is bound to a scope that never changes: none (the process), a run
    (`for_run`), or an iteration (`for_iteration`). Each scope is a new object that
    shares the table, the log and the listeners, so whoever is handed the
    iteration's `Events` records its events against that iteration, and nobody
    reads an id another part of soda left behind."""

    def __init__(
        self,
        db: Database,
        log_path: Path | None = None,
        *,
        run_id: int | None = None,
        iteration: IterationRef | None = None,
        listeners: list[Listener] | None = None,
    ) -> None:
        self.db = db
        self.log_path = log_path
        self._log = _Log(log_path) if log_path is not None else None
        self._run_id = run_id
        self._iteration = iteration
        self._listeners: list[Listener] = [] if listeners is None else listeners

    @property
    def run_id(self) -> int | None:
        return self._run_id

    @property
    def iteration(self) -> IterationRef | None:
        return self._iteration

    @property
    def iteration_id(self) -> int | None:
        return self._iteration.id if self._iteration is not None else None

    def for_run(self, run_id: int | None) -> Events:
        """The events of run `run_id` (no iteration)."""
        return self._scoped(run_id, None)

    def for_iteration(self, iteration: IterationRef) -> Events:
        """The events of `iteration`, in this object's run."""
        return self._scoped(self._run_id, iteration)

    def _scoped(self, run_id: int | None, iteration: IterationRef | None) -> Events:
        listeners = self._listeners
        scoped = Events(self.db, None, run_id=run_id, iteration=iteration, listeners=listeners)
        scoped.log_path, scoped._log = self.log_path, self._log  # one open log for all scopes
        return scoped

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener` after every event this object emits; returns the
        function that unsubscribes it."""
        self._listeners.append(listener)
        return lambda: self._remove(listener)

    def emit(self, kind: str, data: dict[str, Any] | None = None) -> None:
        payload = data or {}
        row = {
            "ts": now(),
            "run_id": self.run_id,
            "iteration_id": self.iteration_id,
            "kind": kind,
            "data_json": dumps(payload),
        }
        event_rows.append(self.db, row)
        if self._log is not None:
            record = {key: row[key] for key in ("ts", "run_id", "iteration_id", "kind")}
            self._log.write(json.dumps({**record, "data": payload}, default=str))
        for listener in list(self._listeners):
            try:
                listener(kind, payload)
            except Exception as exc:  # a display must never stop the loop
                self._remove(listener)
                print(f"soda: live view stopped: {type(exc).__name__}: {exc}", file=sys.stderr)

    def _remove(self, listener: Listener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)


def notify(config: Config, event: str, iteration: int, reason: str, events: Events) -> None:
    """Run `[daemon] notify_command` on DONE, STUCK and HALT; never fatal."""
    command = config.daemon.notify_command
    if not command:
        return
    result = run_command(
        command,
        cwd=config.root,
        timeout=30,
        extra_env={"SODA_EVENT": event, "SODA_ITERATION": str(iteration), "SODA_REASON": reason},
        interruptible=False,  # a first stop lets the person hear how the run ended
    )
    if not result.ok:
        events.emit("notify.failed", {"command": command, "output": result.output[-500:]})
