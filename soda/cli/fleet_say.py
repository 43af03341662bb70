"""The person's inputs to a fleet run: `soda fleet tell|approve|reject|answer|
pause|resume|stop`, built and checked by `soda.human.commands` against what the
server's memo says of the run (`soda.fleet.client.MemoRecord`) and sent as
signals with provenance `fleet`. `soda.cli.main` registers them by importing
this module.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from soda.cli.app import handled, out
from soda.cli.fleet import DEFAULT_ADDRESS, Address, Namespace, Run, fleet, with_client
from soda.human import commands
from soda.human.routing import Control

if TYPE_CHECKING:
    from soda.human.commands import Provenance, RunRecord, Said


def send(
    address: str, namespace: str, run: str, build: Callable[[RunRecord, Provenance], Said]
) -> None:
    """Build the input against the run's memo (`build(record, provenance)`),
    signal it, and say what was sent."""

    async def go(client: Any) -> Said:
        from soda.fleet.client import BY, record_of, signal

        said = build(await record_of(client, run), BY)
        await signal(client, run, said)
        return said

    said = with_client(address, namespace, go)
    out.print(f"sent {said.line()} to {run}", markup=False)
    if said.note:
        out.print(said.note, markup=False)


@fleet.command()
@handled
def tell(
    run: Run,
    text: Annotated[str, typer.Argument(help="What soda should know or do.")],
    kind: Annotated[
        str | None,
        typer.Option(help="correction (the default), spec_change or override (with --action)."),
    ] = None,
    mode: Annotated[str | None, typer.Option(help="For spec_change: replace or amend.")] = None,
    action: Annotated[str | None, typer.Option(help="For override: what to do.")] = None,
    task: Annotated[int | None, typer.Option(help="For override: the task id.")] = None,
    address: Address = DEFAULT_ADDRESS,
    namespace: Namespace = "default",
) -> None:
    """Tell a fleet run something; it reads it at its next SENSE.

    Example: soda fleet tell soda-app-spec-1a2b3c4d5e "use argparse, not click"
    """
    send(
        address, namespace, run,
        lambda _, by: commands.tell(by, text, kind, mode=mode, action=action, task_id=task),
    )  # fmt: skip


@fleet.command()
@handled
def approve(
    run: Run,
    iteration: Annotated[int, typer.Argument(help="Iteration whose plan you approve.")],
    edit: Annotated[
        Path | None,
        typer.Option(
            "--edit",
            help="Approve the plan as this JSON file has it (start from"
            " `soda fleet status RUN --json`'s approval.plan).",
        ),
    ] = None,
    address: Address = DEFAULT_ADDRESS,
    namespace: Namespace = "default",
) -> None:
    """Approve the plan a fleet run's iteration waits with (or may yet ask for).

    With --edit FILE, the waiting plan runs as FILE has it: the edit is checked
    as `soda approve --edit` checks one (plan contract, task keys, dependencies,
    cycles, Trace tasks, [plan] max_tasks) and a bad one is refused with the
    reason, the original plan still waiting.

    Example: soda fleet approve soda-app-spec-1a2b3c4d5e 3 --edit plan.json
    """
    if edit is None:
        send(address, namespace, run, lambda record, by: commands.approve(record, by, iteration))
        return
    from soda.errors import InputError

    try:
        text = edit.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{edit}: cannot read it ({exc}); the original plan still waits") from exc
    send(address, namespace, run, lambda record, by: commands.edit(record, by, iteration, text))


@fleet.command()
@handled
def reject(
    run: Run,
    iteration: Annotated[int, typer.Argument(help="Iteration whose plan you reject.")],
    reason: Annotated[str | None, typer.Option(help="Why (ORIENT reads it).")] = None,
    address: Address = DEFAULT_ADDRESS,
    namespace: Namespace = "default",
) -> None:
    """Reject the plan a fleet run's iteration waits with.

    Example: soda fleet reject soda-app-spec-1a2b3c4d5e 3 --reason "too broad"
    """
    send(
        address, namespace, run,
        lambda record, by: commands.reject(record, by, iteration, reason),
    )  # fmt: skip


@fleet.command()
@handled
def answer(
    run: Run,
    question: Annotated[int, typer.Argument(help="The question's id (soda fleet status).")],
    text: Annotated[str, typer.Argument(help="Your answer.")],
    address: Address = DEFAULT_ADDRESS,
    namespace: Namespace = "default",
) -> None:
    """Answer a question an agent of a fleet run asked.

    Example: soda fleet answer soda-app-spec-1a2b3c4d5e 1 "yes, keep the old API"
    """
    send(
        address, namespace, run,
        lambda record, by: commands.answer(record, by, question, text),
    )  # fmt: skip


@fleet.command()
@handled
def pause(run: Run, address: Address = DEFAULT_ADDRESS, namespace: Namespace = "default") -> None:
    """Pause a fleet run after its current iteration (it holds no worker meanwhile).

    Example: soda fleet pause soda-app-spec-1a2b3c4d5e
    """
    send(address, namespace, run, lambda _, by: commands.control(by, Control.PAUSE))


@fleet.command()
@handled
def resume(run: Run, address: Address = DEFAULT_ADDRESS, namespace: Namespace = "default") -> None:
    """Resume a paused (or waiting) fleet run.

    Example: soda fleet resume soda-app-spec-1a2b3c4d5e
    """
    send(address, namespace, run, lambda _, by: commands.control(by, Control.RESUME))


@fleet.command()
@handled
def stop(run: Run, address: Address = DEFAULT_ADDRESS, namespace: Namespace = "default") -> None:
    """Stop a fleet run after its current iteration.

    Example: soda fleet stop soda-app-spec-1a2b3c4d5e
    """
    send(address, namespace, run, lambda _, by: commands.control(by, Control.STOP))
