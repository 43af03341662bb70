"""`soda issues`: work from the forge's issue tracker (`[tracker]`).

    soda issues          the queue: each labelled issue, its state, milestone
                         branch, pull request and last word
    soda issues sync     read the tracker now (what the daemon's poll does):
                         new labelled issues queued (a writer's) or kept as
                         data, new comments on queued issues read once; with
                         `[tracker] fleet`, each ready issue started as its own
                         fleet run and each run's news written back

`soda.cli.main` registers them by importing this module.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from soda.cli.app import app, handled, out, project_of, say
from soda.cli.view import JSON_HELP
from soda.forge import connect_tracker
from soda.forge import tracker as intake
from soda.store import tracker as rows
from soda.store import tracker_runs

issues = typer.Typer(
    help="Work from the forge's issue tracker: labelled issues as queued milestones."
    "\n\nExample: soda issues sync && soda issues",
    invoke_without_command=True,
)
app.add_typer(issues, name="issues")
AsJson = Annotated[bool, typer.Option("--json", help=JSON_HELP)]


@issues.callback()
@handled
def show_queue(ctx: typer.Context, as_json: AsJson = False) -> None:
    """List the tracker's issues: state, milestone branch, pull request, last word."""
    if ctx.invoked_subcommand is not None:
        return
    db = project_of(ctx).db
    found = rows.items(db)
    runs = tracker_runs.runs(db)
    if as_json:
        out.print_json(
            json.dumps([{**item.__dict__, "run": runs.get(item.number)} for item in found])
        )
        return
    if not found:
        say("no issues yet: label one and run `soda issues sync`")
        return
    for item in found:
        pr = f"#{item.pr_number}" if item.pr_number else "-"
        after = f" after {', '.join(f'#{n}' for n in item.depends)}" if item.depends else ""
        run = f" run {runs[item.number]}" if item.number in runs else ""
        say(
            f"#{item.number:<5} {item.state:<9} {item.branch or '-':<18} PR {pr:<6}"
            f" {item.author}: {item.title[:60]}{after} ({item.last_word or '-'}){run}"
        )


@issues.command()
@handled
def sync(ctx: typer.Context) -> None:
    """Read the tracker now: new labelled issues and new comments on queued ones.

    With `[tracker] fleet`, also start each ready issue's fleet run, send it the
    writers' new comments, and write back what each run did.

    Example: soda issues sync
    """
    project = project_of(ctx)
    config, db = project.config, project.db
    tracker = connect_tracker(config, db)
    if config.tracker.fleet is not None:  # each ready issue its own fleet run
        from soda.cli.issue_fleet import fleet_of
        from soda.daemon.issue_fleet import poll

        done = poll(tracker, config, db, fleet_of(config), say)
    else:
        from soda.daemon.issues import reader  # the daemon's, with the loop: sync only

        done = intake.sync(tracker, config, db, reader(db, config))
    queued = ", ".join(f"#{n}" for n in done.queued) or "none"
    data = ", ".join(f"#{n}" for n in done.data) or "none"
    say(f"queued: {queued}; kept as data (not a writer's): {data}; inputs: {done.inputs}")
