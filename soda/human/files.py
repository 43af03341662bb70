"""The inbox directory, `<state>/inbox/`: the only code that reads it.

A file's life: `inbox/<name>` -> claimed by rename into `inbox/.claimed/` ->
recorded as a pending row and moved to `inbox/processed/`, or moved to
`inbox/rejected/` beside a one-line `<name>.reason`. Files are never deleted and
never overwritten; bad content is never an exception, only a rejection.

Crash safety. The row is recorded (in a transaction) *before* the file leaves
`.claimed/`, so a crash leaves one of two states, both visible on disk: no row yet
(the file goes back to the inbox and is read again) or a row already (the file
goes on to `processed/`). `recover_claimed_files` tells them apart by looking up
the file name and payload in `human_inputs`, so nothing is lost and nothing is
recorded twice (the same words dropped again under the same name and stranded
mid-claim count as recorded: a repeat, not a new instruction). Recovery must not
mistake another ingester's in-flight claim for a stranded one, so recovery and
ingestion hold an exclusive lock on `inbox/.lock`; the claim rename still
tolerates losing a race (the loser skips).
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sqlite_utils import Database

from soda.events import Events
from soda.human.parse import Rejection, display, one_line, parse, payload_json, read
from soda.human.write import WRITTEN_BY_SODA, inbox_dir
from soda.store import human_inputs

# Editors, browsers and download tools leave these while still writing.
IGNORED_ENDINGS = ("~", ".swp", ".swx", ".tmp", ".part", ".crdownload")
CLAIMED, PROCESSED, REJECTED = ".claimed", "processed", "rejected"
SOURCE = "inbox"


@dataclass
class IngestReport:
    """What one `ingest` pass did: rows recorded, files rejected, files left to settle."""

    accepted: list[int] = field(default_factory=list)
    rejected: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def ingest(
    state_dir: Path, db: Database, events: Events, settle_seconds: float = 0.3
) -> IngestReport:
    """Record every settled file in the inbox as a pending row, or reject it.

    Raises only for a broken state directory or database, never for bad content.
    """
    inbox = _inbox_dirs(state_dir)
    report = IngestReport()
    with _inbox_lock(inbox):
        _recover(inbox, db, events)
        for name in _candidates(inbox, settle_seconds, report.skipped):
            _take(inbox, name, db, events, report)
    return report


def recover_claimed_files(
    state_dir: Path, db: Database, events: Events | None = None
) -> list[Path]:
    """Finish what a crash interrupted: files stranded in `.claimed/` go to
    `processed/` when their row was recorded, else back into the inbox.
    Returns where each file went."""
    inbox = _inbox_dirs(state_dir)
    with _inbox_lock(inbox):
        return _recover(inbox, db, events)


def _inbox_dirs(state_dir: Path) -> Path:
    inbox = inbox_dir(state_dir)
    for sub in (CLAIMED, PROCESSED, REJECTED):
        (inbox / sub).mkdir(parents=True, exist_ok=True)
    return inbox


@contextmanager
def _inbox_lock(inbox: Path) -> Iterator[None]:
    # flock is tied to the open file, so closing it (even by dying) releases it.
    with (inbox / ".lock").open("a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        yield


def _recover(inbox: Path, db: Database, events: Events | None) -> list[Path]:
    moved = []
    for entry in sorted(os.scandir(inbox / CLAIMED), key=lambda e: e.name):
        if not entry.is_file(follow_symlinks=False):
            continue
        claimed = Path(entry.path)
        if _already_recorded(db, entry.name, claimed):
            dest = _move(claimed, inbox / PROCESSED)
        else:
            dest = _move(claimed, inbox)
        moved.append(dest)
        if events is not None:
            events.emit("inbox.recovered", {"file": display(entry.name), "to": str(dest)})
    return moved


def _already_recorded(db: Database, name: str, path: Path) -> bool:
    try:
        payload = payload_json(parse(name, read(path)))
    except Rejection:
        return False
    return human_inputs.is_recorded(db, name, payload)


def _candidates(inbox: Path, settle_seconds: float, skipped: list[str]) -> list[str]:
    """Names of regular files ready to take, oldest first; unsettled ones go to `skipped`."""
    ready: list[tuple[float, str]] = []
    current = time.time()
    for entry in os.scandir(inbox):
        if not entry.is_file(follow_symlinks=False) or _ignored(entry.name):
            continue
        try:
            mtime = entry.stat(follow_symlinks=False).st_mtime
        except FileNotFoundError:
            continue  # a person took it back between the listing and now
        # A file touched moments ago may still be open in an editor; soda's own
        # files (write_input) arrive whole by rename and need no settling.
        if 0 <= current - mtime < settle_seconds and not WRITTEN_BY_SODA.match(entry.name):
            skipped.append(entry.name)
        else:
            ready.append((mtime, entry.name))
    return [name for _, name in sorted(ready)]


def _ignored(name: str) -> bool:
    return name.startswith(".") or name.lower().endswith(IGNORED_ENDINGS)


def _take(inbox: Path, name: str, db: Database, events: Events, report: IngestReport) -> None:
    claimed = inbox / CLAIMED / name
    try:
        os.rename(inbox / name, claimed)
    except FileNotFoundError:
        return  # another ingester claimed it first
    try:
        item = parse(name, read(claimed))
        payload = payload_json(item)
    except Rejection as rejection:
        report.rejected.append(_reject(inbox, claimed, rejection.problem, events))
        return
    row_id = human_inputs.record(db, item.kind, payload, SOURCE, name)
    _move(claimed, inbox / PROCESSED)
    events.emit("inbox.accepted", {"id": row_id, "kind": item.kind, "file": name})
    report.accepted.append(row_id)


def _reject(inbox: Path, claimed: Path, problem: str, events: Events) -> Path:
    reason = f"{display(claimed.name)}: {one_line(problem)}"
    # Quoted content may hold lone surrogates, which neither UTF-8 nor SQLite accept.
    reason = reason.encode("utf-8", "backslashreplace").decode("utf-8")
    dest = inbox / REJECTED / _free_name(inbox / REJECTED, claimed.name)
    # The reason goes first: a crash in between leaves a harmless note, not a bare file.
    Path(f"{dest}.reason").write_text(reason + "\n", encoding="utf-8")
    os.rename(claimed, dest)
    events.emit("inbox.rejected", {"file": display(claimed.name), "reason": reason})
    return dest


def _move(path: Path, directory: Path) -> Path:
    dest = directory / _free_name(directory, path.name)
    os.rename(path, dest)
    return dest


def _free_name(directory: Path, name: str) -> str:
    """`name`, or `name` with a numeric suffix, unused in `directory` (with its .reason)."""
    stem, suffix = _split_suffix(name)
    candidate, number = name, 0
    while os.path.lexists(directory / candidate) or os.path.lexists(
        directory / f"{candidate}.reason"
    ):
        number += 1
        candidate = f"{stem}-{number}{suffix}"
    return candidate


def _split_suffix(name: str) -> tuple[str, str]:
    suffix = Path(name).suffix
    return (name[: -len(suffix)], suffix) if suffix else (name, "")
