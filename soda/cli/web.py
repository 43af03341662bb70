"""`soda web`: the dashboard in a browser (`soda.web`), reading the same
database as the CLI; `soda start --web` runs it beside the daemon.

`soda.cli.main` registers the command by importing this module. The CLI hands
the dashboard its own reports (`status`, `history`, `show`), so a page says
what the matching command says.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from soda.cli.app import Project, app, handled, project_of, say

if TYPE_CHECKING:
    from soda.web.site import Reports

WEB_EXTRA = "pip install 'soda-daemon[web]'"


def web_reports(project: Project) -> Reports:
    """The CLI's reports on `project`, as the dashboard reads them."""
    from soda.cli.report import history_json, iteration_json
    from soda.cli.status import status as read_status
    from soda.web.site import Reports

    config, db = project.config, project.db
    return Reports(
        status=lambda: read_status(config, db).to_json(),
        history=lambda limit: history_json(db, limit),
        iteration=lambda number: iteration_json(db, number),
    )


def serve_web(
    project: Project,
    host: str,
    port: int,
    remote: bool,
    names: list[str],
    open_browser: bool,
    follow_pid: int | None,
) -> int:
    """Serve the dashboard for `project` (InputError without the `[web]` extra)."""
    from soda.errors import InputError

    try:
        from soda.web.server import Serving, serve
    except ImportError as exc:
        raise InputError(f"soda web needs its extra ({exc.name} is missing): {WEB_EXTRA}") from None
    from soda.repo.milestone import milestone_name

    reports = web_reports(project)
    serving = Serving(host, port, remote, tuple(names), open_browser, follow_pid)
    return serve(serving, project.config, project.db, milestone_name(project.config), reports, say)


@app.command()
@handled
def web(
    ctx: typer.Context,
    port: Annotated[
        int, typer.Option(help="Port to serve on (0: any free port).", min=0, max=65535)
    ] = 8765,
    host: Annotated[
        str, typer.Option(help="Address to bind; anything but loopback needs --remote.")
    ] = "127.0.0.1",
    remote: Annotated[
        bool,
        typer.Option(
            "--remote",
            help="Allow a --host off loopback; every request then needs the access token"
            " (printed in the URL, or $SODA_WEB_TOKEN).",
        ),
    ] = False,
    allow_host: Annotated[
        list[str] | None,
        typer.Option("--allow-host", help="Another name people reach a remote dashboard by."),
    ] = None,
    open_browser: Annotated[bool, typer.Option("--open", help="Open it in your browser.")] = False,
    follow_pid: Annotated[int | None, typer.Option(hidden=True)] = None,
) -> None:
    """Serve the dashboard: what soda does now, its history, each iteration, the
    tasks and events, live; approve, reject or edit a plan, answer a question,
    send a correction, pause, resume or stop from the page.

    Reads the same database as the CLI, whether or not soda runs. Bound to
    127.0.0.1 unless --host and --remote say otherwise.

    Example: soda web --open
    """
    project = project_of(ctx)
    raise typer.Exit(
        serve_web(project, host, port, remote, allow_host or [], open_browser, follow_pid)
    )
