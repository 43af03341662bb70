"""The todo list on disk: a JSON array of items."""

import json
from dataclasses import asdict
from pathlib import Path

from todo.model import Item


def load(path: Path) -> list[Item]:
    """The items in `path` (none when it does not exist yet)."""
    if not path.exists():
        return []
    return [Item(**entry) for entry in json.loads(path.read_text(encoding="utf-8"))]


def save(path: Path, items: list[Item]) -> None:
    path.write_text(json.dumps([asdict(item) for item in items], indent=2), encoding="utf-8")
