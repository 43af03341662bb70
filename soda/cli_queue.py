"""The queue commands: tell, approve, reject, pause, resume, cancel.

Each writes one human input to state/inbox/ for soda to read at its next SENSE;
they register on `soda.cli.app` (which imports this module last).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from soda.cli import _project, app, handled, out


def _queue(ctx: typer.Context, **fields: Any) -> None:
    from soda.contracts import validate
    from soda.errors import InputError, Violation
    from soda.human.write import describe, write_input

    item = validate("human_input", {k: v for k, v in fields.items() if v is not None})
    if isinstance(item, Violation):
        raise InputError(f"{item.path}: {item.message}")
    path = write_input(_project(ctx).config.state_dir, item)  # type: ignore[arg-type]
    out.print(f"queued {describe(item)}  ({path.name})", markup=False)  # type: ignore[arg-type]


@app.command()
@handled
def tell(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(help="What soda should know or do.")],
    kind: Annotated[
        str, typer.Option(help="correction, spec_change or override (with --action).")
    ] = "correction",
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
    _queue(ctx, kind=kind, text=text, mode=mode, action=action, task_id=task)


@app.command()
@handled
def approve(
    ctx: typer.Context,
    iteration: Annotated[int, typer.Argument(help="Iteration whose plan you approve.")],
) -> None:
    """Approve the risky plan of an iteration that waits for you.

    Example: soda approve 7
    """
    _queue(ctx, kind="approve", target=iteration)


@app.command()
@handled
def reject(
    ctx: typer.Context,
    iteration: Annotated[int, typer.Argument(help="Iteration whose plan you reject.")],
    reason: Annotated[str | None, typer.Option(help="Why, for the next plan.")] = None,
) -> None:
    """Reject the plan of an iteration that waits for approval.

    Example: soda reject 7 --reason "do not touch the schema"
    """
    _queue(ctx, kind="reject", target=iteration, text=reason)


@app.command()
@handled
def pause(ctx: typer.Context) -> None:
    """Pause the background soda after its current iteration.

    Example: soda pause
    """
    _queue(ctx, kind="pause")


@app.command()
@handled
def resume(ctx: typer.Context) -> None:
    """Resume a paused soda.

    Example: soda resume
    """
    _queue(ctx, kind="resume")


@app.command()
@handled
def cancel(ctx: typer.Context) -> None:
    """Cancel the running plan: the current task finishes, pending ones are skipped.

    Example: soda cancel
    """
    _queue(ctx, kind="cancel")
