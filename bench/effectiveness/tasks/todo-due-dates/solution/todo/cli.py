"""The `todo` command: add, list and finish items."""

import argparse
import re
from datetime import date
from pathlib import Path

from todo import store
from todo.model import Item


def due_date(text: str) -> date:
    """An argparse type: a date written YYYY-MM-DD, or a clear error."""
    try:
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            raise ValueError(text)
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--due must be a date YYYY-MM-DD, not {text!r}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="todo", description="A todo list in a JSON file.")
    parser.add_argument("--file", type=Path, default=Path("todo.json"), help="the list's file")
    commands = parser.add_subparsers(dest="command", required=True)
    add = commands.add_parser("add", help="add an item")
    add.add_argument("title")
    add.add_argument("--due", type=due_date, help="when it is due (YYYY-MM-DD)")
    listing = commands.add_parser("list", help="show the items")
    listing.add_argument(
        "--overdue", action="store_true", help="only items not done and due before today"
    )
    done = commands.add_parser("done", help="mark item N as done")
    done.add_argument("number", type=int)
    return parser


def main(argv: list[str] | None = None, today: date | None = None) -> int:
    args = build_parser().parse_args(argv)
    items = store.load(args.file)
    if args.command == "add":
        items.append(Item(args.title, due=args.due))
        store.save(args.file, items)
    elif args.command == "list":
        day = today or date.today()
        for number, item in enumerate(items, start=1):
            if not args.overdue or item.overdue(day):
                print(f"{number}. {item.line()}")
    elif args.command == "done":
        items[args.number - 1].done = True
        store.save(args.file, items)
    return 0
