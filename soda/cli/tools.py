"""`soda tools`: the coding CLIs soda can run as a task's executor, at the
versions it supports, installed with npm into soda's own directory."""

from __future__ import annotations

from typing import Annotated

import typer

from soda.cli.app import app, handled, out


@app.command()
@handled
def tools(
    action: Annotated[
        str, typer.Argument(help="list (the default), or install: npm-install the named CLIs.")
    ] = "list",
    names: Annotated[
        list[str] | None,
        typer.Argument(help="For install: the CLIs to install (`soda tools` lists them)."),
    ] = None,
) -> None:
    """The coding CLIs soda can use as executors ([executor] backend), each pinned
    to the version soda supports, and where they are.

    `soda tools install NAME...` runs npm (Node.js 18 or later) to install the
    pinned versions into soda's own directory (beside its Python, never
    globally); running it again changes nothing. To use a CLI installed some
    other way, set [executor] command to its path (`soda doctor` checks its
    version).

    Example: soda tools install claude-code codex
    """
    from soda.agent.backends.pins import install, installed_binary, tools_dir
    from soda.agent.executors import PINS, pins_for
    from soda.errors import InputError

    if action == "install":
        pins = pins_for(list(names or []))
        target, said = install(pins)
        for pin in pins:
            out.print(f"{pin.tool}: {pin.package} {pin.version} -> {installed_binary(pin)}")
        out.print(
            f"{said}: {target}" if said == "already installed" else f"installed into {target}",
            markup=False,
        )
        return
    if action != "list" or names:
        raise InputError(f"soda tools: unknown action {action!r}; use list or install NAME...")
    out.print(f"soda's tools directory: {tools_dir()}", markup=False)
    for name, pin in PINS.items():
        binary = installed_binary(pin)
        where = (
            str(binary) if binary.exists() else "not installed (soda tools install " + name + ")"
        )
        out.print(f"  {name}: {pin.package} {pin.version}: {where}", markup=False)
