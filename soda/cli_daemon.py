"""The daemon commands: start, stop, status (and the hidden daemon-run).

They register on `soda.cli.app`, which imports this module near its end.
"""

from __future__ import annotations

from typing import Annotated

import typer

from soda.cli import _project, app, handled, out


@app.command()
@handled
def start(ctx: typer.Context) -> None:
    """Start soda in the background for this repository.

    It works until DONE or STUCK, then idles until you write to it (soda tell,
    a file in state/inbox/, or a spec change). Log: state/logs/soda.log.

    Example: soda start && soda status
    """
    from soda import daemon

    config = _project(ctx).config
    pid = daemon.start(config)
    out.print(f"soda started (pid {pid}); log: {config.state_dir / 'logs' / daemon.LOG_NAME}")


@app.command()
@handled
def stop(ctx: typer.Context) -> None:
    """Stop the background soda at its next safe point.

    Example: soda stop
    """
    from soda import daemon

    pid = daemon.stop(_project(ctx).config)
    out.print(f"soda (pid {pid}) stopped" if pid else "soda is not running here")


@app.command()
@handled
def status(
    ctx: typer.Context,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object (see soda.status).")
    ] = False,
) -> None:
    """Say whether soda runs here, what it is doing, and what waits for it: pause,
    approvals, rejected inbox files, the last error, the budgets.

    Example: soda status --json
    """
    from soda.status import status as read_status

    project = _project(ctx)
    found = read_status(project.config, project.db)
    if as_json:
        typer.echo(found.dumps())
        return
    for line in found.lines():
        out.print(line, markup=False)


@app.command("daemon-run", hidden=True)
@handled
def daemon_run(ctx: typer.Context) -> None:
    """The background process itself (started by soda start).

    Example: soda daemon-run
    """
    from soda.config import find_config
    from soda.daemon import Daemon

    raise typer.Exit(Daemon(find_config(_project(ctx).directory)).run())
