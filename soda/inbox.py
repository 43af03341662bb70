"""Transitional: callers move to soda.human. The old function names of the
human-input queue, each delegating to the package that now owns it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sqlite_utils import Database

from soda.events import Events
from soda.human import HumanQueue, files
from soda.human.files import CLAIMED, PROCESSED, REJECTED, SOURCE, IngestReport
from soda.human.parse import KINDS, MAX_BYTES, QueuedInput, queued
from soda.human.write import WRITTEN_BY_SODA, describe, write_input
from soda.store import human_inputs

__all__ = [
    "CLAIMED",
    "KINDS",
    "MAX_BYTES",
    "PROCESSED",
    "REJECTED",
    "SOURCE",
    "WRITTEN_BY_SODA",
    "IngestReport",
    "QueuedInput",
    "claim",
    "describe",
    "ingest",
    "mark_applied",
    "pending",
    "recover_claimed_files",
    "release_claims",
    "write_input",
]


def ingest(
    state_dir: Path, db: Database, events: Events, settle_seconds: float = 0.3
) -> IngestReport:
    return HumanQueue(state_dir, db, events).ingest(settle_seconds)


def recover_claimed_files(
    state_dir: Path, db: Database, events: Events | None = None
) -> list[Path]:
    return files.recover_claimed_files(state_dir, db, events)


def pending(db: Database) -> list[QueuedInput]:
    return [queued(*row) for row in human_inputs.pending(db)]


def claim(db: Database, ids: Sequence[int], iteration: int) -> int:
    return human_inputs.claim(db, ids, iteration)


def mark_applied(db: Database, ids: Sequence[int], iteration: int, response: str) -> int:
    return human_inputs.mark_applied(db, ids, iteration, response)


def release_claims(db: Database) -> int:
    return human_inputs.release_claims(db)
