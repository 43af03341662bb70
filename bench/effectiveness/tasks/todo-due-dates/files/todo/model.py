"""What a todo item is."""

from dataclasses import dataclass


@dataclass
class Item:
    title: str
    done: bool = False

    def line(self) -> str:
        """How `todo list` shows the item."""
        return f"[{'x' if self.done else ' '}] {self.title}"
