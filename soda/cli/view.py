"""The commands that look at what soda did and does: tasks, history, show, events
(with --follow) and cost, each with --json for scripts.

`soda.cli.main` registers them by importing this module.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from soda.cli.app import app, handled, out, project_of
from soda.store import agent_calls
from soda.store import events as event_rows
from soda.store.events import EventRow, as_record, data_text
from soda.system.clock import SYSTEM_CLOCK

JSON_HELP = "Print one JSON object to stdout instead (for scripts)."

FOLLOW_POLL_SECONDS = 0.2
"""How often `soda events -f` looks for new rows (the database is the source)."""


@app.command()
@handled
def tasks(
    ctx: typer.Context,
    status: Annotated[
        str | None,
        typer.Option(help="Only tasks with this status: open, in_progress, blocked, closed."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Show the milestone's tasks as a tree.

    With --json: {"milestone": ..., "tasks": [{id, parent_id, title, description,
    status, status_reason, risk, created_at, updated_at, closed_at}, ...]}.

    Example: soda tasks --status blocked
    """
    from dataclasses import asdict

    from soda.repo.milestone import milestone_name
    from soda.trace import SqliteTracker, render_tree

    project = project_of(ctx)
    milestone = milestone_name(project.config)
    items = SqliteTracker(project.db, milestone).list(status)
    if as_json:
        tasks = [{k: v for k, v in asdict(t).items() if k != "milestone"} for t in items]
        typer.echo(json.dumps({"milestone": milestone, "tasks": tasks}))
        return
    if not items:
        out.print("no tasks yet (soda creates them when it runs)")
        return
    out.print(render_tree(items), markup=False)


@app.command()
@handled
def history(
    ctx: typer.Context,
    limit: Annotated[
        int, typer.Option(help="Show at most this many iterations (1 or more).", min=1)
    ] = 50,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """One row per iteration: intent, decision, outcome, merge, time, tokens.

    With --json: {"iterations": [{number, intent, decision, outcome, merged_commit,
    duration_s, tokens, cost_usd, phase}, ...]}, oldest first.

    Example: soda history --limit 10
    """
    from soda.cli.report import history_json, history_table

    db = project_of(ctx).db
    if as_json:
        typer.echo(json.dumps(history_json(db, limit)))
        return
    out.print(history_table(db, limit))


@app.command()
@handled
def show(
    ctx: typer.Context,
    number: Annotated[int, typer.Argument(help="Iteration number (see soda history).")],
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    requests: Annotated[
        bool,
        typer.Option(
            "--requests",
            help="Print what each model call was sent and answered (kept with"
            " model.log_requests = true).",
        ),
    ] = False,
) -> None:
    """Everything about one iteration: claims, orientation, decision, act, agent calls
    and what each agent said.

    With --json: the iteration's columns (claims, orient and act decoded),
    human_inputs, halts and agent_calls (each with its text lines). With
    --requests: the model calls' requests and answers instead (--json: one object
    per call).

    Example: soda show 1 --json
    """
    from soda.cli.report import iteration_json, show_iteration

    project = project_of(ctx)
    if requests:
        _show_requests(project.config.state_dir, number, project.config.model.log_requests, as_json)
        return
    db = project.db
    if as_json:
        typer.echo(json.dumps(iteration_json(db, number), default=str))
        return
    out.print(show_iteration(db, number), markup=False)


def _show_requests(state_dir: Path, number: int, logging: bool, as_json: bool) -> None:
    from soda.agent.request_log import read, render
    from soda.errors import InputError

    calls = read(state_dir, number)
    if not calls:
        why = (
            "it is older than model.log_requests_keep iterations, or made no model call"
            if logging
            else "set model.log_requests = true in soda.toml to keep them"
        )
        raise InputError(f"no requests kept for iteration {number}: {why}")
    if as_json:
        for call in calls:
            typer.echo(json.dumps(call, default=str))
        return
    out.print(render(calls), markup=False)


def event_line(row: EventRow) -> str:
    """One event for people: time, iteration, kind and its data, compact."""
    record = as_record(row)
    where = f"#{record['iteration']}" if record["iteration"] is not None else "-"
    text = data_text(record["data"])
    return f"{record['ts']}  {where:>4}  {record['kind']:<20} {text}".rstrip()


def _write(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


@app.command()
@handled
def events(
    ctx: typer.Context,
    follow: Annotated[
        bool, typer.Option("-f", "--follow", help="Keep printing new events until Ctrl-C.")
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="One JSON object per line: id, ts, run_id, iteration, kind, data.",
        ),
    ] = False,
    kind: Annotated[
        str | None,
        typer.Option(help="Only events whose kind starts with this, e.g. act or agent.turn."),
    ] = None,
    limit: Annotated[
        int, typer.Option(help="Print at most this many past events first (0: none).", min=0)
    ] = 50,
) -> None:
    """Print soda's events, oldest first; with -f, follow new ones as they happen.

    Works while soda runs (in the foreground or as the daemon) and after.

    Example: soda events -f --kind act
    """
    db = project_of(ctx).db

    def show(row: EventRow) -> None:
        _write(json.dumps(as_record(row), default=str) if as_json else event_line(row))

    try:
        last = event_rows.last_id(db)
        past = (
            [row for row in event_rows.latest(db, kind, limit) if row[0] <= last] if limit else []
        )
        for row in past:
            show(row)
        if not follow:
            if not past and not as_json:
                out.print("no events yet (soda records them as it runs)")
            return
        while True:
            for row in event_rows.after(db, last, kind):
                show(row)
                last = row[0]
            SYSTEM_CLOCK.sleep(FOLLOW_POLL_SECONDS)
    except KeyboardInterrupt:
        return  # Ctrl-C is how -f ends: a normal exit
    except BrokenPipeError:  # the reader went away (e.g. `| head`): nothing to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def cost_report(db: Any) -> dict[str, Any]:
    """`soda cost --json`: calls, tokens and USD per iteration, agent and model,
    and in total, from `agent_calls`."""

    def rows(items: list[agent_calls.CostRow], key: str) -> list[dict[str, Any]]:
        return [_cost_entry(item, key) for item in items]

    sources = agent_calls.price_sources(db)
    models = [
        {**entry, "price_source": ", ".join(sources.get(str(entry["model"]), []))}
        for entry in rows(agent_calls.cost_by(db, "model"), "model")
    ]
    return {
        "iterations": rows(agent_calls.cost_by_iteration(db), "iteration"),
        "agents": rows(agent_calls.cost_by(db, "agent"), "agent"),
        "models": models,
        "total": {k: v for k, v in _cost_entry(agent_calls.cost_total(db), "").items() if k},
    }


def _cost_entry(item: agent_calls.CostRow, key: str) -> dict[str, Any]:
    name, calls, tokens_in, tokens_out, cost = item
    return {
        key: name,
        "calls": calls,
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
        "cost_usd": round(float(cost), 6),
    }


@app.command()
@handled
def cost(
    ctx: typer.Context,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object: iterations, agents, models, total.")
    ] = False,
) -> None:
    """What the model calls cost: per iteration, per agent, per model, and in total.

    Tokens in count cache writes and reads too. Each model's price source says
    where its price came from: soda.toml ([model.prices]), genai-prices (its
    version), local (a model on this machine, free) or unknown (counted $0).

    Example: soda cost --json
    """
    from rich.table import Table

    report = cost_report(project_of(ctx).db)
    if as_json:
        typer.echo(json.dumps(report))
        return
    total = report["total"]
    if not total["calls"]:
        out.print("no model calls yet: nothing spent")
        return
    for key, title in (("iteration", "iterations"), ("agent", "agents"), ("model", "models")):
        table = Table(title=f"cost by {key}", title_justify="left")
        sourced = key == "model"
        for column in (key, "calls", "tokens in", "tokens out", "cost"):
            table.add_column(column, justify="left" if column == key else "right")
        if sourced:  # where each model's price came from (soda.llm.prices)
            table.add_column("price source", justify="left")
        for entry in report[title]:
            name = entry[key]
            table.add_row(
                "-" if name is None else str(name),
                str(entry["calls"]),
                f"{entry['tokens_in']:,}",
                f"{entry['tokens_out']:,}",
                f"${entry['cost_usd']:.4f}",
                *([entry["price_source"]] if sourced else []),
            )
        out.print(table)
    out.print(
        f"total: {total['calls']} calls, {total['tokens_in']:,} tokens in,"
        f" {total['tokens_out']:,} out, ${total['cost_usd']:.4f}",
        markup=False,
    )
