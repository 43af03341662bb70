"""What a todo item is."""

from dataclasses import dataclass
from datetime import date


@dataclass
class Item:
    title: str
    done: bool = False
    due: date | None = None

    def line(self) -> str:
        """How `todo list` shows the item."""
        text = f"[{'x' if self.done else ' '}] {self.title}"
        return f"{text} (due {self.due.isoformat()})" if self.due else text

    def overdue(self, today: date) -> bool:
        """Not done, and due before `today`."""
        return self.due is not None and self.due <= today
