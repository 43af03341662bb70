"""The human-input queue: files people drop into `<state>/inbox/` (directly or via
`soda tell`), their checking against the `human_input` contract, and the
`human_inputs` table rows that the loop reads, claims and marks applied.

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
import json
import os
import re
import secrets
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, get_args

from sqlite_utils import Database

from soda.contracts import HumanInput, HumanKind, validate
from soda.errors import StructuralError, Violation
from soda.events import Events
from soda.store.db import dumps, now

MAX_BYTES = 256 * 1024
KINDS: tuple[str, ...] = get_args(HumanKind)
TEXT_SUFFIXES = frozenset({".txt", ".md", ""})
# Editors, browsers and download tools leave these while still writing.
IGNORED_ENDINGS = ("~", ".swp", ".swx", ".tmp", ".part", ".crdownload")
CLAIMED, PROCESSED, REJECTED = ".claimed", "processed", "rejected"
SOURCE = "inbox"
INT_FIELDS = frozenset({"task_id", "target"})
FRONT_MATTER_START = re.compile(r"---[ \t]*(?:\r?\n|\Z)")
FRONT_MATTER = re.compile(
    r"\A---[ \t]*\r?\n(?P<header>.*?)^---[ \t]*\r?$\n?", re.DOTALL | re.MULTILINE
)


@dataclass
class IngestReport:
    """What one `ingest` pass did: rows recorded, files rejected, files left to settle."""

    accepted: list[int] = field(default_factory=list)
    rejected: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class QueuedInput:
    """One row of the human-input queue, with its payload checked and typed."""

    id: int
    kind: str
    payload: HumanInput
    received_at: str
    source_file: str | None


class _Rejection(Exception):
    """Internal: a file's content is unusable; `problem` says why, for a person."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(problem)


# --- writing ----------------------------------------------------------------


def write_input(state_dir: Path, item: HumanInput) -> Path:
    """Drop `item` into the inbox atomically and return its path.

    The temporary name starts with a dot, which ingest ignores, so a reader never
    sees half a file; works whether or not a daemon is running.
    """
    inbox = state_dir / "inbox"
    inbox.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    name = f"{stamp}-{item.kind}-{secrets.token_hex(3)}.json"
    temp = inbox / f".{name}.tmp"
    body = json.dumps(item.model_dump(mode="json", exclude_none=True), indent=2) + "\n"
    with temp.open("w", encoding="utf-8") as fh:
        fh.write(body)
        fh.flush()
        os.fsync(fh.fileno())
    final = inbox / name
    os.replace(temp, final)
    _fsync_dir(inbox)
    return final


def _fsync_dir(path: Path) -> None:
    # Makes the rename itself durable; not every platform lets a directory be fsynced.
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# --- ingesting --------------------------------------------------------------


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
    inbox = state_dir / "inbox"
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
            events.emit("inbox.recovered", {"file": _display(entry.name), "to": str(dest)})
    return moved


def _already_recorded(db: Database, name: str, path: Path) -> bool:
    try:
        payload = _payload_json(_parse(name, _read(path)))
    except _Rejection:
        return False
    row = db.execute(
        "SELECT 1 FROM human_inputs WHERE source_file = ? AND payload_json = ? LIMIT 1",
        [name, payload],
    ).fetchone()
    return row is not None


WRITTEN_BY_SODA = re.compile(r"^\d{8}T\d{12}Z-[a-z_]+-[0-9a-f]{6}\.json$")
"""Names `write_input` gives its files."""


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
        item = _parse(name, _read(claimed))
        payload = _payload_json(item)
    except _Rejection as rejection:
        report.rejected.append(_reject(inbox, claimed, rejection.problem, events))
        return
    row_id = _record(db, item, payload, name)
    _move(claimed, inbox / PROCESSED)
    events.emit("inbox.accepted", {"id": row_id, "kind": item.kind, "file": name})
    report.accepted.append(row_id)


def _record(db: Database, item: HumanInput, payload: str, name: str) -> int:
    with db.conn:
        cursor = db.conn.execute(
            "INSERT INTO human_inputs (kind, payload_json, source, source_file, status,"
            " received_at) VALUES (?, ?, ?, ?, 'pending', ?)",
            [item.kind, payload, SOURCE, name, now()],
        )
    assert cursor.lastrowid is not None
    return cursor.lastrowid


def _reject(inbox: Path, claimed: Path, problem: str, events: Events) -> Path:
    reason = f"{_display(claimed.name)}: {_one_line(problem)}"
    # Quoted content may hold lone surrogates, which neither UTF-8 nor SQLite accept.
    reason = reason.encode("utf-8", "backslashreplace").decode("utf-8")
    dest = inbox / REJECTED / _free_name(inbox / REJECTED, claimed.name)
    # The reason goes first: a crash in between leaves a harmless note, not a bare file.
    Path(f"{dest}.reason").write_text(reason + "\n", encoding="utf-8")
    os.rename(claimed, dest)
    events.emit("inbox.rejected", {"file": _display(claimed.name), "reason": reason})
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


# --- parsing ----------------------------------------------------------------


def _read(path: Path) -> bytes:
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise _Rejection(f"cannot be read: {exc.strerror}") from exc
    if len(raw) > MAX_BYTES:
        raise _Rejection(f"too large: over {MAX_BYTES // 1024} KiB")
    return raw


def _parse(name: str, raw: bytes) -> HumanInput:
    """The checked input a file holds, or a `_Rejection` saying what is wrong."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _Rejection("file name is not valid UTF-8; rename it") from exc
    suffix = Path(name).suffix.lower()
    if suffix != ".json" and suffix not in TEXT_SUFFIXES:
        raise _Rejection(f"unsupported extension {suffix!r}: use .json, .md, .txt or none")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _Rejection(f"not UTF-8: invalid byte at offset {exc.start}") from exc
    if not text.strip():
        raise _Rejection("file is empty")
    data = _json_document(text) if suffix == ".json" else _text_document(text)
    return _checked(data)


def _json_document(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _Rejection(
            f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from exc
    except (ValueError, RecursionError) as exc:  # e.g. a 5000-digit number, deep nesting
        raise _Rejection(f"invalid JSON: {exc}") from exc


def _text_document(text: str) -> dict[str, Any]:
    """Plain text is a correction; an optional `---` front matter sets other fields."""
    if not FRONT_MATTER_START.match(text):
        return {"kind": "correction", "text": text.strip()}
    match = FRONT_MATTER.match(text)
    if match is None:
        raise _Rejection("front matter opened with '---' on line 1 is never closed")
    data: dict[str, Any] = {"kind": "correction", **_front_matter(match["header"])}
    body = text[match.end() :].strip()
    if body:
        if data.get("text"):
            raise _Rejection("text given both in the front matter and in the body")
        data["text"] = body
    elif data["kind"] in ("correction", "spec_change") and not data.get("text"):
        raise _Rejection(f"empty text: a {_clip(data['kind'])} needs words below the header")
    return data


def _front_matter(header: str) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for number, line in enumerate(header.splitlines(), start=2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition(":")
        key = key.strip()
        if not sep or not key:
            raise _Rejection(f"front matter line {number} is not 'key: value': {_clip(line)!r}")
        if key in fields:
            raise _Rejection(f"front matter line {number} repeats key {_clip(key)!r}")
        fields[key] = _scalar(key, value.strip())
    return fields


def _scalar(key: str, value: str) -> Any:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    if not value:
        return None
    # Bounded digits: int() refuses very long strings, and no task id is that long.
    if key in INT_FIELDS and re.fullmatch(r"[+-]?\d{1,18}", value):
        return int(value)
    return value


def _checked(data: Any) -> HumanInput:
    if isinstance(data, dict):
        if "kind" in data and data["kind"] not in KINDS:
            raise _Rejection(f"unknown kind {_clip(data['kind'])!r}; known: {', '.join(KINDS)}")
        text = data.get("text")
        if isinstance(text, str) and not text.strip():
            raise _Rejection("text is empty")
    try:
        result = validate("human_input", data)
    except RecursionError as exc:
        raise _Rejection("JSON is nested too deeply") from exc
    if isinstance(result, Violation):
        raise _Rejection(f"human_input contract violated at {result.path}: {result.message}")
    return result


def _payload_json(item: HumanInput) -> str:
    payload = dumps(item.model_dump(mode="json", exclude_none=True))
    try:
        payload.encode("utf-8")
    except UnicodeEncodeError as exc:
        # JSON may spell a lone surrogate (\ud800), which no UTF-8 column can hold.
        raise _Rejection("text contains an unpaired surrogate escape (\\ud800-\\udfff)") from exc
    return payload


def _clip(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[:limit] + "..."


def _one_line(text: str, limit: int | None = None) -> str:
    line = " ".join(text.split())
    return line if limit is None or len(line) <= limit else line[: limit - 1] + "…"


def _display(name: str) -> str:
    # File names may hold newlines or undecodable bytes; reasons and events must not.
    return name if name.isprintable() else repr(name)


# --- the queue --------------------------------------------------------------


def pending(db: Database) -> list[QueuedInput]:
    """Inputs waiting to be applied, oldest first."""
    rows = db.execute(
        "SELECT id, kind, payload_json, received_at, source_file FROM human_inputs"
        " WHERE status = 'pending' ORDER BY received_at, id"
    ).fetchall()
    return [_queued(*row) for row in rows]


def _queued(
    row_id: int, kind: str, payload_json: str, received_at: str, source_file: str | None
) -> QueuedInput:
    try:
        payload = HumanInput.model_validate_json(payload_json)
    except ValueError as exc:
        raise StructuralError(f"human_inputs row {row_id} holds an invalid payload") from exc
    return QueuedInput(row_id, kind, payload, received_at, source_file)


def claim(db: Database, ids: Sequence[int], iteration: int) -> int:
    """Mark pending inputs as taken up by `iteration`; returns how many changed."""
    return _update(
        db,
        ids,
        "status = 'claimed', claimed_iteration = ?",
        [iteration],
        "status = 'pending'",
    )


def mark_applied(db: Database, ids: Sequence[int], iteration: int, response: str) -> int:
    """Record what soda did about the inputs; returns how many changed.

    Pending inputs may be applied without a claim (control inputs act at once)."""
    return _update(
        db,
        ids,
        "status = 'applied', applied_iteration = ?, applied_at = ?, response = ?",
        [iteration, now(), response],
        "status IN ('pending', 'claimed')",
    )


def release_claims(db: Database) -> int:
    """After a crash: return every claimed input to pending; returns how many."""
    with db.conn:
        cursor = db.conn.execute(
            "UPDATE human_inputs SET status = 'pending', claimed_iteration = NULL"
            " WHERE status = 'claimed'"
        )
    return cursor.rowcount


def _update(db: Database, ids: Sequence[int], assign: str, values: list[Any], when: str) -> int:
    if not ids:
        return 0
    marks = ", ".join("?" for _ in ids)
    with db.conn:
        cursor = db.conn.execute(
            f"UPDATE human_inputs SET {assign} WHERE id IN ({marks}) AND {when}",
            [*values, *ids],
        )
    return cursor.rowcount


def describe(item: HumanInput) -> str:
    """One line for a prompt, e.g. "override: close task #4"."""
    text = _one_line(item.text or "", limit=300)
    why = f" ({text})" if text else ""
    if item.kind == "correction":
        return f"correction: {text}"
    if item.kind == "override":
        if item.action == "constraint":
            return f"override: add constraint: {text}"
        return f"override: {item.action} task #{item.task_id}{why}"
    if item.kind == "spec_change":
        mode = f" ({item.mode})" if item.mode else ""
        return f"spec change{mode}: {text}"
    if item.kind in ("approve", "reject"):
        return f"{item.kind}: plan of iteration {item.target}{why}"
    return f"{item.kind}{why}"
