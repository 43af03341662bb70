"""The plan commands: `soda plan` (a plan-only preview) and `soda answer` (a
person's answer to an agent's question); `soda.cli.main` registers them by importing this module.

`soda plan` runs SENSE, ORIENT and DECIDE (`soda.loop.host.preview`), prints the plan as
a DAG and leaves the repository as it found it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import typer

from soda.cli.app import Project, app, by_cli, handled, project_of, queue, record_of, say


def preview_plan(project: Project, say: Callable[[str], None]) -> int:
    """Run a plan-only iteration and print it; returns the exit code (errors go to
    the caller's handler: a plan ORIENT could not make valid is structural, exit 4)."""
    from soda.loop.host import preview, render_preview

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
    raise typer.Exit(preview_plan(project_of(ctx), say))


@app.command()
@handled
def answer(
    ctx: typer.Context,
    question: Annotated[int, typer.Argument(help="The question's id (see soda status).")],
    text: Annotated[str, typer.Argument(help="Your answer, in words.")],
) -> None:
    """Answer a question an agent asked; its task resumes where it stopped.

    The answer waits in state/inbox/ and is recorded at the next SENSE. Refused
    for a question that does not exist or is no longer open.

    Example: soda answer 3 "use the decimal module, round half even"
    """
    from soda.human.commands import answer as answered

    queue(ctx, answered(record_of(ctx), by_cli(), question, text))
