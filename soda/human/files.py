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

Hostile entries. Every entry is handled whatever its name or type: names are
kept as the file system's bytes (non-UTF-8 names are rejected under their own
bytes), a name too long for the destination (it must leave room for `.reason`
within NAME_MAX) is shortened to a prefix plus a hash of the whole name, and a
taken name gets a `-N` suffix. A symlink, directory, FIFO, socket or device is
never followed or opened (`parse.read`): it is moved, itself, to `rejected/`.
An entry that cannot be moved at all (e.g. a directory without write
permission) is left in place and reported, once per process, as
`inbox.unmovable`; it never stops the pass.
"""

from __future__ import annotations

import fcntl
import hashlib
import itertools
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sqlite_utils import Database

from soda.events import Events
from soda.human.parse import Rejection, display, one_line, parse, payload_json, read
from soda.human.write import WRITTEN_BY_SODA, inbox_dir, source_of
from soda.store import human_inputs

# Editors, browsers and download tools leave these while still writing.
IGNORED_ENDINGS = ("~", ".swp", ".swx", ".tmp", ".part", ".crdownload")
CLAIMED, PROCESSED, REJECTED = ".claimed", "processed", "rejected"
REASON = ".reason"
NAME_MAX = 255
"""Bytes in one file name on common Linux file systems (less where pathconf says so)."""
MAX_SUFFIX_BYTES = 16
"""A longer "extension" of a name being shortened is not kept as one."""


@dataclass
class IngestReport:
    """What one `ingest` pass did: rows recorded, files rejected, files left to settle."""

    accepted: list[int] = field(default_factory=list)
    rejected: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    unmovable: list[str] = field(default_factory=list)
    """Entries left where they were because the file system refused to move them."""


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
            try:
                _take(inbox, name, db, events, report)
            except OSError as exc:
                report.unmovable.append(display(name))
                _unmovable(events, inbox / name, exc)
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
    # Never follows a link and never waits on a FIFO put in its place (ENXIO instead).
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(inbox / ".lock", flags, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _recover(inbox: Path, db: Database, events: Events | None) -> list[Path]:
    moved = []
    for entry in sorted(os.scandir(inbox / CLAIMED), key=lambda e: e.name):
        claimed = Path(entry.path)
        try:
            if _already_recorded(db, entry.name, claimed):
                dest = _move(claimed, inbox / PROCESSED)
            else:  # back to the inbox, where the next pass takes or rejects it
                dest = _move(claimed, inbox)
        except OSError as exc:
            _unmovable(events, claimed, exc)
            continue
        moved.append(dest)
        if events is not None:
            events.emit("inbox.recovered", {"file": display(entry.name), "to": display(str(dest))})
    return moved


def _already_recorded(db: Database, name: str, path: Path) -> bool:
    try:
        payload = payload_json(parse(name, read(path)))
    except Rejection:
        return False
    return human_inputs.is_recorded(db, name, payload)


def _candidates(inbox: Path, settle_seconds: float, skipped: list[str]) -> list[str]:
    """Names of entries ready to take, oldest first; unsettled ones go to `skipped`."""
    ready: list[tuple[float, str]] = []
    current = time.time()
    for entry in os.scandir(inbox):
        # Any type of entry: one that is not a regular file is rejected by `_take`.
        if _ignored(entry.name) or entry.name in (PROCESSED, REJECTED):
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
    if os.path.lexists(claimed):
        return  # rename would replace it; recovery moves it on first
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
    row_id = human_inputs.record(db, item.kind, payload, source_of(name), name)
    _move(claimed, inbox / PROCESSED)
    events.emit("inbox.accepted", {"id": row_id, "kind": item.kind, "file": name})
    report.accepted.append(row_id)


def _reject(inbox: Path, claimed: Path, problem: str, events: Events) -> Path:
    reason = f"{display(claimed.name)}: {one_line(problem)}"
    # Quoted content may hold lone surrogates, which neither UTF-8 nor SQLite accept.
    reason = reason.encode("utf-8", "backslashreplace").decode("utf-8")
    rejected = inbox / REJECTED
    # The reason goes first: a crash in between leaves a harmless note, not a bare file.
    while True:
        dest = rejected / _free_name(rejected, claimed.name, reserve=len(REASON))
        try:
            _create(Path(f"{dest}{REASON}"), (reason + "\n").encode("utf-8"))
            break
        except FileExistsError:
            continue  # someone else took the name meanwhile: find another
    os.rename(claimed, dest)
    events.emit("inbox.rejected", {"file": display(claimed.name), "reason": reason})
    return dest


def _create(path: Path, data: bytes) -> None:
    """Write a new file; never replaces anything, never follows a link."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _move(path: Path, directory: Path) -> Path:
    dest = directory / _free_name(directory, path.name)
    os.rename(path, dest)
    return dest


_reported_unmovable: set[tuple[str, int | None]] = set()


def _unmovable(events: Events | None, path: Path, exc: OSError) -> None:
    """Say once per process that an entry could not be moved; it stays in place."""
    key = (str(path), exc.errno)
    if events is None or key in _reported_unmovable:
        return
    _reported_unmovable.add(key)
    events.emit("inbox.unmovable", {"file": display(path.name), "error": exc.strerror or str(exc)})


def _free_name(directory: Path, name: str, reserve: int = 0) -> str:
    """`name`, or `name` with a numeric suffix, unused in `directory` (with its .reason),
    shortened when needed so that it plus `reserve` bytes fits in the directory's
    NAME_MAX."""
    limit = _name_max(directory) - reserve
    stem, suffix = _split_suffix(name)
    for number in itertools.count():
        candidate = _fit(f"{stem}-{number}{suffix}" if number else name, limit)
        taken = (directory / candidate, directory / f"{candidate}{REASON}")
        if not any(os.path.lexists(path) for path in taken):
            return candidate
    raise AssertionError("unreachable")


def _name_max(directory: Path) -> int:
    try:
        return min(os.pathconf(directory, "PC_NAME_MAX"), NAME_MAX)
    except (OSError, ValueError):
        return NAME_MAX


def _fit(name: str, limit: int) -> str:
    """`name` if its bytes fit in `limit`; else a prefix of it, a hash of the whole
    name and its suffix, cut at a character boundary (names are file-system bytes:
    undecodable ones are surrogate escapes, one byte each)."""
    raw = os.fsencode(name)
    if len(raw) <= limit:
        return name
    tag = "-" + hashlib.sha256(raw).hexdigest()[:12]
    stem, suffix = _split_suffix(name)
    if len(os.fsencode(suffix)) > MAX_SUFFIX_BYTES:
        stem, suffix = name, ""
    room = limit - len(tag) - len(os.fsencode(suffix))
    prefix, used = [], 0
    for char in stem:
        size = len(os.fsencode(char))
        if used + size > room:
            break
        prefix.append(char)
        used += size
    return "".join(prefix) + tag + suffix


def _split_suffix(name: str) -> tuple[str, str]:
    suffix = Path(name).suffix
    return (name[: -len(suffix)], suffix) if suffix else (name, "")
