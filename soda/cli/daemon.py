"""The daemon commands: start, stop, status, budget (and the hidden daemon-run).

`soda.cli.main` registers them by importing this module.
"""

from __future__ import annotations

from typing import Annotated

import typer

from soda.cli.app import app, handled, out, project_of


@app.command()
@handled
def start(
    ctx: typer.Context,
    web: Annotated[
        bool, typer.Option("--web", help="Serve the dashboard beside it (see soda web).")
    ] = False,
    web_port: Annotated[
        int, typer.Option(help="The dashboard's port, with --web.", min=0, max=65535)
    ] = 8765,
) -> None:
    """Start soda in the background for this repository.

    Returns once the daemon holds the lock, has recovered from any crash and has
    checked the config, the provider's key and the jail; otherwise exits non-zero
    with the daemon's reason. It works until DONE or STUCK, then idles until you
    write to it (soda tell, a file in state/inbox/, or a spec change). Log:
    state/logs/soda.log.

    With --web, the dashboard (soda web) serves on 127.0.0.1 beside the daemon
    and ends when it does.

    Example: soda start && soda status
    """
    from soda.daemon import control as daemon_control
    from soda.daemon.parts import LOG_NAME

    config = project_of(ctx).config
    pid = daemon_control.start(config)
    out.print(f"soda started (pid {pid}); log: {config.state_dir / 'logs' / LOG_NAME}")
    if web:
        from soda.cli.web_beside import start_beside

        project = project_of(ctx)
        out.print(start_beside(config, project.directory, pid, web_port), markup=False)


@app.command()
@handled
def stop(
    ctx: typer.Context,
    timeout: Annotated[
        float,
        typer.Option(
            help="Seconds to wait for the next safe point before stopping at once"
            " (every command soda started is killed, a notification too).",
            min=0,
            max=86_400,
        ),
    ] = 30.0,
) -> None:
    """Stop soda (the daemon, or a `soda run`) within seconds.

    The commands soda is running (a test run, an agent's command) are killed at
    once and their results thrown away; the iteration is recorded interrupted.
    Says what it is waiting for, if anything ("waiting for `notify-send ...`, 3 s");
    after --timeout seconds it stops at once, and nothing soda started keeps running.

    Example: soda stop --timeout 10
    """
    from soda.daemon import control as daemon_control

    project = project_of(ctx)
    stopped = daemon_control.stop(
        project.config, project.db, timeout, lambda line: out.print(line, markup=False)
    )
    if stopped is None:
        out.print("soda is not running here")
    elif stopped.at_once:
        out.print(f"soda (pid {stopped.pid}) stopped at once; what it ran was killed")
    else:
        out.print(f"soda (pid {stopped.pid}) stopped")


@app.command()
@handled
def budget(
    ctx: typer.Context,
    action: Annotated[
        str,
        typer.Argument(help="show (the default), or reset: today's spend counts from now."),
    ] = "show",
) -> None:
    """Each budget's use and limit, and what it counts (soda.toml [budget], [loop]).

    budget.max_cost_usd and loop.max_iterations count one run (one `soda run`,
    or one wake of the daemon); budget.max_cost_usd_per_day counts the local day
    and `soda budget reset` makes it count from now.

    Example: soda budget reset
    """
    from soda.agent.budget import budget_lines, reset_day
    from soda.errors import InputError

    project = project_of(ctx)
    if action not in ("show", "reset"):
        raise InputError(f"soda budget: unknown action {action!r}; use show or reset")
    if action == "reset":
        reset_day(project.db)
        out.print("today's spend counts from now (budget.max_cost_usd_per_day)")
    for line in budget_lines(project.config, project.db):
        out.print(line, markup=False)


@app.command()
@handled
def status(
    ctx: typer.Context,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object (see soda.cli.status).")
    ] = False,
) -> None:
    """Say whether soda runs here, what it is doing, and what waits for it: pause,
    approvals, rejected inbox files, the last error, the budgets.

    Example: soda status --json
    """
    from soda.cli.status import status as read_status

    project = project_of(ctx)
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
    from soda.cli.issue_fleet import fleet_of
    from soda.config import find_config
    from soda.daemon.process import Daemon

    raise typer.Exit(Daemon(find_config(project_of(ctx).directory), fleet_of).run())
