"""The plan commands: `soda plan` (a plan-only preview) and `soda answer` (a
person's answer to an agent's question); they register on `soda.cli.app`.

`soda plan` runs SENSE, ORIENT and DECIDE (`soda.plan_only`), prints the plan as
a DAG and leaves the repository as it found it.
"""

from __future__ import annotations

from collections.abc import Callable

import typer

from soda.cli import Project, _project, _say, app, handled


def preview_plan(project: Project, say: Callable[[str], None]) -> int:
    """Run a plan-only iteration and print it; returns the exit code (errors go to
    the caller's handler: a plan ORIENT could not make valid is structural, exit 4)."""
    from soda.plan_only import preview, render_preview

    config = project.config
    for line in render_preview(preview(config, say), config):
        say(line)
    return 0


@app.command()
@handled
def plan(ctx: typer.Context) -> None:
    """Show the plan the next iteration would carry out, as a DAG; change nothing.

    Runs SENSE, ORIENT and DECIDE (model calls included), records a plan-only
    iteration (see `soda show N`) and prints the plan's batches, each task's risk
    and dependencies. No branch, worktree or commit is made, pending human
    inputs stay pending, and no Trace task is created.

    Example: soda plan
    """
    raise typer.Exit(preview_plan(_project(ctx), _say))
