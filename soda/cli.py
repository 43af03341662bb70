"""The command line: parse, load config, call the core, print.

This is the only module that turns soda's errors into messages and exit codes
(see `soda.errors`). Every command's help ends with an example.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

from soda import __version__
from soda.config import Config, find_config, load
from soda.errors import SodaError
from soda.store import Database, open_db

app = typer.Typer(
    name="soda",
    help="soda: an autonomous coding daemon. Sense, orient, decide, act until the spec is met.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
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
        out.print(f"created  {name}")
    for name in report.kept:
        out.print(f"kept     {name}")
    if report.changed:
        out.print(f"soda is set up in {report.root}. Write your spec, then: soda run --once")
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
def tasks(
    ctx: typer.Context,
    status: Annotated[
        str | None,
        typer.Option(help="Only tasks with this status: open, in_progress, blocked, closed."),
    ] = None,
) -> None:
    """Show the milestone's tasks as a tree.

    Example: soda tasks --status blocked
    """
    from soda.milestone import milestone_name
    from soda.trace import SqliteTracker, render_tree

    project = _project(ctx)
    tracker = SqliteTracker(project.db, milestone_name(project.config))
    items = tracker.list(status)
    if not items:
        out.print("no tasks yet (soda creates them when it runs)")
        return
    out.print(render_tree(items), markup=False)


@app.command()
@handled
def history(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option(help="Show at most this many iterations.")] = 50,
) -> None:
    """One row per iteration: intent, decision, outcome, merge, time, tokens.

    Example: soda history --limit 10
    """
    from soda.report import history_table

    out.print(history_table(_project(ctx).db, limit))


@app.command()
@handled
def run(
    ctx: typer.Context,
    once: Annotated[bool, typer.Option("--once", help="Stop after one iteration.")] = False,
    max_iterations: Annotated[
        int | None, typer.Option(help="Override [loop] max_iterations for this run.", min=1)
    ] = None,
) -> None:
    """Run the loop in the foreground until DONE, STUCK or HALT.

    Exit codes: 0 DONE (or one CONTINUE with --once), 2 bad config or input,
    3 STUCK, 4 HALT, 5 a transient failure outlasted the retry budget.

    Example: soda run --once
    """
    from soda.loop import run_loop
    from soda.session import Session

    project = _project(ctx)
    session = Session.open(project.config)
    if max_iterations is not None:
        session.max_iterations = max_iterations
    result = run_loop(session, _say, once=once)
    out.print(f"{result.ending.name}: {result.reason}", markup=False)
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
    from soda.demo import run_demo
    from soda.report import history_table

    target, result = run_demo(directory, _say)
    db = open_db(target.resolve() / "state" / "soda.db")
    out.print(history_table(db))
    out.print(f"{result.ending.name}: {result.reason}", markup=False)
    out.print(
        f"Look around:\n  cd {target}\n  soda history\n  soda show 1\n  soda tasks\n"
        f"  git log --graph --oneline soda/spec\n  sqlite3 {target / 'state' / 'soda.db'}",
        markup=False,
    )
    raise typer.Exit(result.ending.exit_code)


@app.command()
@handled
def show(
    ctx: typer.Context,
    number: Annotated[int, typer.Argument(help="Iteration number (see soda history).")],
) -> None:
    """Everything about one iteration: claims, orientation, decision, act, agent calls.

    Example: soda show 1
    """
    from soda.report import show_iteration

    out.print(show_iteration(_project(ctx).db, number), markup=False)


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


@app.command()
@handled
def start(ctx: typer.Context) -> None:
    """Start soda in the background for this repository.

    It works until DONE or STUCK, then idles until you write to it (soda tell,
    a file in state/inbox/, or a spec change). Log: state/logs/soda.log.

    Example: soda start && soda status
    """
    from soda import daemon

    config = _project(ctx).config
    pid = daemon.start(config)
    out.print(f"soda started (pid {pid}); log: {config.state_dir / 'logs' / daemon.LOG_NAME}")


@app.command()
@handled
def stop(ctx: typer.Context) -> None:
    """Stop the background soda at its next safe point.

    Example: soda stop
    """
    from soda import daemon

    pid = daemon.stop(_project(ctx).config)
    out.print(f"soda (pid {pid}) stopped" if pid else "soda is not running here")


@app.command()
@handled
def status(ctx: typer.Context) -> None:
    """Say whether soda runs here, what it is doing, and what waits for it.

    Example: soda status
    """
    from soda import daemon

    project = _project(ctx)
    for line in daemon.status(project.config, project.db).lines():
        out.print(line, markup=False)


@app.command("daemon-run", hidden=True)
@handled
def daemon_run(ctx: typer.Context) -> None:
    """The background process itself (started by soda start).

    Example: soda daemon-run
    """
    from soda.config import find_config
    from soda.daemon import Daemon

    raise typer.Exit(Daemon(find_config(_project(ctx).directory)).run())


def _say(line: str) -> None:
    out.print(line, markup=False)


def main() -> None:
    # Rich wraps to the terminal; keep output stable when piped.
    os.environ.setdefault("COLUMNS", "120")
    app()


# The queue commands (tell, approve, reject, pause, resume, cancel) live in
# soda.cli_queue; importing it here, last, registers them on `app` in this order.
from soda import cli_queue as _cli_queue  # noqa: E402, F401
