"""The command line: parse, load config, call the core, print.

This is the only module that turns soda's errors into messages and exit codes
(see `soda.errors`). Every command's help ends with an example.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console

from soda import __version__
from soda.cli_run import drive, ending_line, soda_command
from soda.config import Config, find_config, load
from soda.errors import SodaError
from soda.store import Database, open_db

if TYPE_CHECKING:
    pass

app = typer.Typer(
    name="soda",
    help="soda: an autonomous coding daemon. Sense, orient, decide, act until the spec is met.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    # -h as well as --help, on the root and (inherited by click) every command.
    context_settings={"help_option_names": ["-h", "--help"]},
)
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

F = TypeVar("F", bound=Callable[..., Any])


def handled(fn: F) -> F:
    """Translate soda's expected errors into one line each and their exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SodaError as exc:
            for line in str(exc).splitlines() or [type(exc).__name__]:
                err.print(f"soda: {line}", markup=False)
            raise typer.Exit(exc.exit_code) from None

    return wrapper  # type: ignore[return-value]


class Project:
    """What a command needs: the loaded config and, on demand, the database."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._config: Config | None = None
        self._db: Database | None = None

    @property
    def config(self) -> Config:
        if self._config is None:
            self._config = load(find_config(self.directory))
        return self._config

    @property
    def db(self) -> Database:
        if self._db is None:
            self._db = open_db(self.config.db_path)
        return self._db


def _project(ctx: typer.Context) -> Project:
    return ctx.obj


def _version(value: bool) -> None:
    if value:
        out.print(f"soda {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    directory: Annotated[
        Path,
        typer.Option("-C", "--dir", help="Run as if soda was started in DIR.", show_default=False),
    ] = Path("."),
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """soda works toward a spec in a git repository, one iteration at a time.

    Example: soda init && soda run --once
    """
    ctx.obj = Project(directory.resolve())


@app.command()
@handled
def init(ctx: typer.Context) -> None:
    """Prepare this git repository: soda.toml, specs/SPEC.md and state/.

    Safe to run twice: existing files are kept, and it says so.

    Example: cd my-repo && soda init
    """
    from soda.init import init_project

    report = init_project(_project(ctx).directory)
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
    from soda.progress import show_progress
    from soda.session import Session

    project = _project(ctx)
    say = _say_err if as_json else _say
    if plan_only:
        from soda.cli_plan import preview_plan

        raise typer.Exit(preview_plan(project, say))
    session = Session.open(project.config)
    if max_iterations is not None:
        session.max_iterations = max_iterations
    with show_progress(session.events, err if as_json else out):
        result, merged = drive(session, say, once=once)
    say(ending_line(result, session.milestone.branch, merged))
    if as_json:
        summary = {
            "ending": result.ending.value,
            "exit_code": result.ending.exit_code,
            "iteration": result.number,
            "reason": result.reason,
            "milestone_branch": session.milestone.branch,
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
    from soda.demo import NO_COST_NOTE, start_demo
    from soda.progress import show_progress
    from soda.report import history_table

    target, session = start_demo(directory, _say)
    with show_progress(session.events, out):
        result, merged = drive(session, _say)
    out.print(history_table(session.db))
    for line in NO_COST_NOTE:
        _say(line)
    _say(ending_line(result, session.milestone.branch, merged))
    cmd = soda_command()
    _say(
        f"Look around:\n  cd {shlex.quote(str(target))}\n  {cmd} history\n  {cmd} show 1\n"
        f"  {cmd} tasks\n  git log --graph --oneline {session.milestone.branch}\n"
        f"  sqlite3 {shlex.quote(str(target / 'state' / 'soda.db'))}"
    )
    raise typer.Exit(result.ending.exit_code)


@app.command()
def doctor(
    ctx: typer.Context,
    ping: Annotated[
        bool, typer.Option("--ping", help="Also send one tiny request to the provider.")
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
    from soda.doctor import run_checks

    checks = run_checks(_project(ctx).directory, ping=ping, tests=tests)
    for check in checks:
        out.print(f"{check.label}  {check.name:<9} {check.detail}", markup=False)
    raise typer.Exit(0 if all(check.ok for check in checks) else 1)


def _say(line: str) -> None:
    out.print(line, markup=False)


def _say_err(line: str) -> None:
    err.print(line, markup=False)


def main() -> None:
    # Rich wraps to the terminal; keep output stable when piped.
    os.environ.setdefault("COLUMNS", "120")
    app()


# The daemon commands (start, stop, status) live in soda.cli_daemon and the queue
# commands (tell, approve, reject, pause, resume, cancel) in soda.cli_queue, the
# views (tasks, history, show, events, cost) in soda.cli_view, the plan commands
# (plan, answer) in soda.cli_plan;
# importing them here, last, registers them on `app` in this order.
from soda import cli_daemon as _cli_daemon  # noqa: E402, F401
from soda import cli_plan as _cli_plan  # noqa: E402, F401
from soda import cli_queue as _cli_queue  # noqa: E402, F401
from soda import cli_view as _cli_view  # noqa: E402, F401
