"""The queue commands: tell, approve (also --edit), reject, pause, resume, cancel.

Each builds one human input with `soda.human.commands` (which checks it, as for
every face) and writes it to state/inbox/ for soda to read at its next SENSE;
`soda.cli.main` registers them by importing this module.

`approve N` and `reject N` first check the database: they refuse (exit 2) an N
below 1, an iteration that has ended (it waits for nobody any more), and an N
beyond the next iteration. They accept an iteration that is waiting or still
running (it may yet ask: a risky plan, or a merge the gate may not make alone),
and the next one, which the daemon may not have started yet.
"""

from __future__ import annotations

from typing import Annotated

import typer

from soda.cli.app import app, by_cli, handled, queue, record_of
from soda.human import commands
from soda.human.routing import Control


@app.command()
@handled
def tell(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(help="What soda should know or do.")],
    kind: Annotated[
        str | None,
        typer.Option(help="correction (the default), spec_change or override (with --action)."),
    ] = None,
    mode: Annotated[str | None, typer.Option(help="For spec_change: replace or amend.")] = None,
    action: Annotated[
        str | None,
        typer.Option(help="For override: skip, prioritise, reopen, close or constraint."),
    ] = None,
    task: Annotated[int | None, typer.Option(help="For override: the task id.")] = None,
) -> None:
    """Tell soda something; it reads it at the next SENSE.

    Works whether or not soda is running (the message waits in state/inbox/).

    Example: soda tell "use argparse, not click"
    """
    queue(ctx, commands.tell(by_cli(), text, kind, mode=mode, action=action, task_id=task))


@app.command()
@handled
def approve(
    ctx: typer.Context,
    iteration: Annotated[int, typer.Argument(help="Iteration whose plan you approve.")],
    edit: Annotated[
        bool,
        typer.Option(
            "--edit", help="Edit the waiting plan (JSON) in $VISUAL or $EDITOR, then approve it."
        ),
    ] = False,
) -> None:
    """Approve the risky plan (or held merge) of an iteration that waits for you.

    Refused for an iteration that has ended or does not exist; the next
    iteration may be approved before it starts. With --edit, the waiting plan
    opens in your editor as JSON; the edit is checked (plan contract, task keys,
    dependencies, cycles, Trace tasks, [plan] max_tasks) and a bad one is refused
    with the reason, the original plan still waiting.

    Example: soda approve 7 --edit
    """
    record = record_of(ctx)
    if not edit:
        queue(ctx, commands.approve(record, by_cli(), iteration))
        return
    from soda.cli.plan_edit import edit_text

    text = edit_text(commands.plan_to_edit(record, iteration))
    queue(ctx, commands.edit(record, by_cli(), iteration, text))


@app.command()
@handled
def reject(
    ctx: typer.Context,
    iteration: Annotated[int, typer.Argument(help="Iteration whose plan you reject.")],
    reason: Annotated[str | None, typer.Option(help="Why, for the next plan.")] = None,
) -> None:
    """Reject the plan (or held merge) of an iteration that waits for approval.

    Refused for an iteration that has ended or does not exist.

    Example: soda reject 7 --reason "do not touch the schema"
    """
    queue(ctx, commands.reject(record_of(ctx), by_cli(), iteration, reason))


@app.command()
@handled
def pause(ctx: typer.Context) -> None:
    """Pause the background soda after its current iteration.

    Example: soda pause
    """
    queue(ctx, commands.control(by_cli(), Control.PAUSE))


@app.command()
@handled
def resume(ctx: typer.Context) -> None:
    """Resume a paused soda.

    Example: soda resume
    """
    queue(ctx, commands.control(by_cli(), Control.RESUME))


@app.command()
@handled
def cancel(ctx: typer.Context) -> None:
    """Cancel the running plan: the current task finishes, pending ones are skipped.

    Example: soda cancel
    """
    queue(ctx, commands.control(by_cli(), Control.CANCEL))
