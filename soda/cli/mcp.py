"""`soda mcp serve`: soda as an MCP server over stdio for one repository
(`soda.mcp`), so a person's MCP client (Claude Code, Codex, an editor) reads
what soda does and says what the person says. The CLI hands it its own
reports (`status`, `history`, `show`, `cost`), as it does to the dashboard.

`soda.cli.main` registers the group by importing this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from soda.cli.app import Project, app, handled, project_of

if TYPE_CHECKING:
    from soda.mcp.server import Reports

MCP_EXTRA = "pip install 'soda-daemon[mcp]'"

mcp = typer.Typer(
    name="mcp",
    help=(
        "soda over the Model Context Protocol: `soda mcp serve` for your MCP client."
        "\n\nExample: claude mcp add soda -- soda -C ~/code/app mcp serve"
    ),
    no_args_is_help=True,
)
app.add_typer(mcp, name="mcp")


def mcp_reports(project: Project) -> Reports:
    """The CLI's reports on `project`, as the MCP tools read them."""
    from soda.cli.report import history_json, iteration_json
    from soda.cli.status import status as read_status
    from soda.cli.view import cost_report
    from soda.mcp.server import Reports

    config, db = project.config, project.db
    return Reports(
        status=lambda: read_status(config, db).to_json(),
        history=lambda limit: history_json(db, limit),
        iteration=lambda number: iteration_json(db, number),
        cost=lambda: cost_report(db),
    )


@mcp.command()
@handled
def serve(ctx: typer.Context) -> None:
    """Serve this repository's soda to an MCP client over stdin/stdout.

    Tools to read (status, history, show_iteration, tasks, cost, events) and to
    say what you say (tell, answer, approve, reject, edit_plan, pause, resume,
    stop); every input is checked as `soda tell`/`approve` check it and queued
    with provenance mcp:CLIENT. Refuses to start inside soda's jail. Register it
    with your client, e.g.: claude mcp add soda -- soda -C /path/to/repo mcp serve

    Example: soda -C ~/src/project mcp serve
    """
    from soda.errors import InputError
    from soda.mcp.guard import check_state, refuse_in_jail

    refuse_in_jail()
    try:
        from soda.mcp.server import Served, serve
    except ImportError as exc:
        raise InputError(f"soda mcp needs its extra ({exc.name} is missing): {MCP_EXTRA}") from None
    from soda.repo.milestone import milestone_name

    project = project_of(ctx)
    check_state(project.config)
    served = Served(
        project.config, project.db, milestone_name(project.config), mcp_reports(project)
    )
    serve(served)
