"""`soda`'s entry point (the `soda` script and `python -m soda`). It imports only
the command module of the command asked for (`HOMES`), so a command does not pay
for every other one's imports: the forge's HTTP client, the inputs' checks, the
fleet. `soda --version` imports none. `soda`, `soda --help`, another root option
alone or a name soda does not know import them all (`soda.cli.main`), so help
lists every command and typer's "No such command" knows them.
`tests/test_cli_entry.py` checks `HOMES` against what the modules register.
"""

from __future__ import annotations

import importlib
import os
import sys

HOMES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("init", "schema", "run", "demo", "doctor"), ("core",)),
    **dict.fromkeys(("start", "stop", "budget", "status", "daemon-run"), ("daemon",)),
    **dict.fromkeys(("tasks", "history", "show", "events", "cost"), ("view",)),
    **dict.fromkeys(("plan", "answer"), ("plan",)),
    **dict.fromkeys(("tell", "approve", "reject", "pause", "resume", "cancel"), ("queue",)),
    "worker": ("fleet",),
    "fleet": ("fleet", "fleet_say"),
    "tools": ("tools",),
    "web": ("web",),
    "issues": ("issues",),
    "mcp": ("mcp",),
}
"""Each command (or group) by name, and the modules under `soda.cli` that register it."""
VALUED_ROOT_OPTIONS = frozenset({"-C", "--dir"})
"""The root's options that take a value (see `soda.cli.app._root`)."""


def main() -> None:
    # Rich wraps to the terminal; keep output stable when piped.
    os.environ.setdefault("COLUMNS", "120")
    command = command_named(sys.argv[1:])
    modules = HOMES.get(command or "")
    if command is None and "--version" in root_options(sys.argv[1:]):
        modules = ()  # printed by the root's eager option: no command is loaded
    if modules is None:
        importlib.import_module("soda.cli.main")
    for module in modules or ():
        importlib.import_module(f"soda.cli.{module}")
    from soda.cli.app import app

    app()


def root_options(args: list[str]) -> list[str]:
    """The root's options in `args` (before the command; not an option's value)."""
    found = []
    words = iter(args)
    for word in words:
        if not word.startswith("-"):
            break
        found.append(word)
        if word in VALUED_ROOT_OPTIONS:
            next(words, None)
    return found


def command_named(args: list[str]) -> str | None:
    """The command `args` asks for: the first word past the root's options, or
    None when there is none (help, the version, nothing)."""
    words = iter(args)
    for word in words:
        if word in VALUED_ROOT_OPTIONS:
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None
