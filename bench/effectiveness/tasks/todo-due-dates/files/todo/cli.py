"""The `todo` command: add, list and finish items."""

import argparse
from pathlib import Path

from todo import store
from todo.model import Item


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="todo", description="A todo list in a JSON file.")
    parser.add_argument("--file", type=Path, default=Path("todo.json"), help="the list's file")
    commands = parser.add_subparsers(dest="command", required=True)
    add = commands.add_parser("add", help="add an item")
    add.add_argument("title")
    commands.add_parser("list", help="show the items")
    done = commands.add_parser("done", help="mark item N as done")
    done.add_argument("number", type=int)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    items = store.load(args.file)
    if args.command == "add":
        items.append(Item(args.title))
        store.save(args.file, items)
    elif args.command == "list":
        for number, item in enumerate(items, start=1):
            print(f"{number}. {item.line()}")
    elif args.command == "done":
        items[args.number - 1].done = True
        store.save(args.file, items)
    return 0
