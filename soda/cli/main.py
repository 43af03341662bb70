"""`soda`'s entry point. Importing the command modules registers their commands
on `soda.cli.app.app`, in this order (it is the order of `soda --help`):
core (init, schema, run, demo, doctor), daemon (start, stop, status, budget,
daemon), plan (plan, answer), queue (tell, approve, reject, pause, resume,
cancel), view (tasks, history, show, events, cost), web, fleet (worker, and
the `fleet` group), fleet_say (the person's inputs to a fleet run), tools
(tools), issues (the `issues` group: the forge's issue tracker), mcp (the
`mcp` group: `soda mcp serve`).
"""

from __future__ import annotations

import os

from soda.cli import core, daemon, fleet, fleet_say, issues, mcp, plan, queue, tools, view, web
from soda.cli.app import app

__all__ = ["app", "main"]
COMMAND_MODULES = (core, daemon, plan, queue, view, web, fleet, fleet_say, tools, issues, mcp)


def main() -> None:
    # Rich wraps to the terminal; keep output stable when piped.
    os.environ.setdefault("COLUMNS", "120")
    app()
