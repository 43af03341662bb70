"""The one place that writes events: a row in the `events` table and a JSON line
in `state/logs/events.jsonl`, so both SQL and `tail -f` can follow soda."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from soda.store import events as event_rows
from soda.store.db import dumps, now


class Events:
    """Appends typed events. `kind` is a dotted name such as `act.merged`,
    `provider.retry` or `inbox.rejected`; `data` is any JSON-able mapping."""

    def __init__(self, db: Database, log_path: Path | None = None) -> None:
        self.db = db
        self.log_path = log_path
        self.run_id: int | None = None
        self.iteration_id: int | None = None

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
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            record = {key: row[key] for key in ("ts", "run_id", "iteration_id", "kind")}
            line = json.dumps({**record, "data": payload}, default=str)
            with self.log_path.open("a", encoding="utf-8") as fh:
                fh.write(line + "\n")
