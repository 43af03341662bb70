"""`soda web`: the dashboard in a browser (`soda.web`), reading the same
database as the CLI; `soda start --web` runs it beside the daemon.

`soda.cli.main` registers the command by importing this module. The CLI hands
the dashboard its own reports (`status`, `history`, `show`), so a page says
what the matching command says.
"""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from soda.cli.app import Project, app, handled, project_of, say

if TYPE_CHECKING:
    from soda.web.site import Reports

WEB_EXTRA = "pip install 'soda-daemon[web]'"
WEB_LOG = "web.log"
READY_SECONDS = 20.0
"""How long `soda start --web` waits for the dashboard to say where it serves."""


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


def start_beside(project: Project, daemon_pid: int, port: int) -> str:
    """Start `soda web` in the background beside the daemon `daemon_pid` (it ends
    when the daemon does); the line saying where it serves. Log: logs/web.log."""
    from soda.errors import UserError
    from soda.system.clock import SYSTEM_CLOCK

    log_path = project.config.state_dir / "logs" / WEB_LOG
    log_path.parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "soda", "-C", str(project.directory), "web"]
    argv += ["--port", str(port), "--follow-pid", str(daemon_pid)]
    with log_path.open("w", encoding="utf-8") as log:
        child = subprocess.Popen(
            argv,
            cwd=project.directory,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = SYSTEM_CLOCK.monotonic() + READY_SECONDS
    while SYSTEM_CLOCK.monotonic() < deadline:
        lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        serving = [line for line in lines if line.startswith("soda web: serving")]
        if serving:
            return f"{serving[0]}; log: {log_path}"
        if child.poll() is not None:
            last = lines[-1] if lines else "(nothing in its log)"
            raise UserError(f"the dashboard did not start: {last.removeprefix('soda: ')}")
        SYSTEM_CLOCK.sleep(0.05)
    child.kill()
    child.wait()
    raise UserError(
        f"the dashboard did not say it serves within {READY_SECONDS:g} s; see {log_path}"
    )
