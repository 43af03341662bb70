"""The core commands: init, schema, run, demo, doctor."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Annotated

import typer

from soda.cli.app import app, err, handled, out, project_of, say, say_err
from soda.cli.run import drive, ending_line, soda_command


@app.command()
@handled
def init(ctx: typer.Context) -> None:
    """Prepare this git repository: soda.toml, specs/SPEC.md and state/.

    Safe to run twice: existing files are kept, and it says so.

    Example: cd my-repo && soda init
    """
    from soda.cli.init import init_project

    report = init_project(project_of(ctx).directory)
    for name in report.created:
        out.print(f"created  {name}", markup=False)
    for name in report.kept:
        out.print(f"kept     {name}", markup=False)
    if report.base_branch is not None:
        out.print(
            f"base_branch = {report.base_branch!r} ({report.base_branch_source});"
            " change it in soda.toml if soda should start from another branch",
            markup=False,
        )
    if report.test_command is not None:
        found = report.test_command
        out.print(f"test_command = {found.command!r} ({found.why})", markup=False)
        for line in found.advice:
            out.print(f"  {line}", markup=False)
    if report.changed:
        out.print(
            f"soda is set up in {report.root}. Write your spec, then: {soda_command()} run --once",
            markup=False,
        )
    else:
        out.print("nothing to do: soda is already set up here")


@app.command()
@handled
def schema(
    name: Annotated[str, typer.Argument(help="Contract name, e.g. plan or human_input.")] = "",
) -> None:
    """Print a contract (JSON Schema), e.g. the shape of an inbox file.

    Without NAME, list the contracts.

    Example: soda schema human_input
    """
    from soda.contracts import CONTRACTS, load_schema

    if not name:
        for contract in sorted(CONTRACTS):
            out.print(contract)
        return
    out.print(json.dumps(load_schema(name), indent=2), markup=False)


@app.command()
@handled
def run(
    ctx: typer.Context,
    once: Annotated[bool, typer.Option("--once", help="Stop after one iteration.")] = False,
    max_iterations: Annotated[
        int | None, typer.Option(help="Override [loop] max_iterations for this run.", min=1)
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print progress to stderr and, at the end, one JSON object to stdout:"
            " ending, exit_code, iteration, reason, milestone_branch, merged_commit.",
        ),
    ] = False,
    plan_only: Annotated[
        bool,
        typer.Option("--plan-only", help="Only print the next plan as a DAG (as `soda plan`)."),
    ] = False,
) -> None:
    """Run the loop in the foreground until DONE, STUCK or HALT.

    Prints the milestone branch first and each merge commit as it lands; the last
    line says how the run ended. Exit codes: 0 DONE (or, with --once, one
    iteration finished and more work remains: the last line and --json say
    which), 2 bad config or input, 3 STUCK, 4 HALT, 5 a transient failure
    outlasted the retry budget.

    Example: soda run --once --json
    """
    from soda.cli.progress import show_progress
    from soda.loop.host import open_run

    project = project_of(ctx)
    tell = say_err if as_json else say
    if plan_only:
        from soda.cli.plan import preview_plan

        raise typer.Exit(preview_plan(project, tell))
    run = open_run(project.config, max_iterations=max_iterations)
    with show_progress(run.events, err if as_json else out):
        result, merged = drive(run, tell, once=once)
    tell(ending_line(result, run.milestone.branch, merged))
    if as_json:
        summary = {
            "ending": result.ending.value,
            "exit_code": result.ending.exit_code,
            "iteration": result.number,
            "reason": result.reason,
            "milestone_branch": run.milestone.branch,
            "merged_commit": merged,
        }
        typer.echo(json.dumps(summary))
    raise typer.Exit(result.ending.exit_code)


@app.command()
@handled
def demo(
    directory: Annotated[
        Path | None,
        typer.Option("--dir", help="Create the demo project here (new or empty directory)."),
    ] = None,
) -> None:
    """Run the whole loop offline on a generated sample project (scripted model).

    Example: soda demo --dir /tmp/soda-demo
    """
    from soda.cli.demo import NO_COST_NOTE, start_demo
    from soda.cli.progress import show_progress
    from soda.cli.report import history_table

    target, run = start_demo(directory, say)
    with show_progress(run.events, out):
        result, merged = drive(run, say)
    out.print(history_table(run.db))
    for line in NO_COST_NOTE:
        say(line)
    say(ending_line(result, run.milestone.branch, merged))
    cmd = soda_command()
    say(
        f"Look around:\n  cd {shlex.quote(str(target))}\n  {cmd} history\n  {cmd} show 1\n"
        f"  {cmd} tasks\n  git log --graph --oneline {run.milestone.branch}\n"
        f"  sqlite3 {shlex.quote(str(target / 'state' / 'soda.db'))}"
    )
    raise typer.Exit(result.ending.exit_code)


@app.command()
def doctor(
    ctx: typer.Context,
    ping: Annotated[
        bool,
        typer.Option(
            "--ping", help="Also send one tiny request to the provider (and one to the forge)."
        ),
    ] = False,
    tests: Annotated[
        bool,
        typer.Option("--tests", help="Also run the tests once and check what they imported."),
    ] = False,
) -> None:
    """Check config, git, the test command, the jail, the gate, the state database
    and the provider.

    Prints one pass/warn/FAIL line per check; exits 1 if any failed.

    Example: soda doctor --ping --tests
    """
    from soda.cli.doctor import run_checks

    checks = run_checks(project_of(ctx).directory, ping=ping, tests=tests)
    for check in checks:
        out.print(f"{check.label}  {check.name:<9} {check.detail}", markup=False)
    raise typer.Exit(0 if all(check.ok for check in checks) else 1)
