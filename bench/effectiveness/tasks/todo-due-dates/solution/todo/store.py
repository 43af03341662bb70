"""The todo list on disk: a JSON array of items, dates as "YYYY-MM-DD"."""

import json
from datetime import date
from pathlib import Path
from typing import Any

from todo.model import Item


def load(path: Path) -> list[Item]:
    """The items in `path` (none when it does not exist yet). Items written before
    due dates existed have none."""
    if not path.exists():
        return []
    return [_item(entry) for entry in json.loads(path.read_text(encoding="utf-8"))]


def _item(entry: dict[str, Any]) -> Item:
    due = entry.get("due")
    return Item(entry["title"], entry.get("done", False), date.fromisoformat(due) if due else None)


def save(path: Path, items: list[Item]) -> None:
    data = [
        {"title": i.title, "done": i.done, "due": i.due.isoformat() if i.due else None}
        for i in items
    ]
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
