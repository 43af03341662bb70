"""The command line: parse, load config, call the core, print.

This is the only module that turns soda's errors into messages and exit codes
(see `soda.errors`). Every command's help ends with an example.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console

from soda import __version__
from soda.config import Config, find_config, load
from soda.errors import SodaError
from soda.store import Database, open_db

if TYPE_CHECKING:
    from soda.loop import IterationResult
    from soda.session import Session

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
    limit: Annotated[
        int, typer.Option(help="Show at most this many iterations (1 or more).", min=1)
    ] = 50,
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
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print progress to stderr and, at the end, one JSON object to stdout:"
            " ending, exit_code, iteration, reason, milestone_branch, merged_commit.",
        ),
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
    from soda.session import Session

    project = _project(ctx)
    say = _say_err if as_json else _say
    session = Session.open(project.config)
    if max_iterations is not None:
        session.max_iterations = max_iterations
    result, merged = _drive(session, say, once=once)
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


class MergeWatch:
    """A printer for the loop that also says, after each line, whether the
    latest iteration of this run landed a merge commit (read from its record),
    so every merge is printed with its commit as it happens."""

    def __init__(self, session: Session, say: Callable[[str], None]) -> None:
        from soda.store import runs

        self.session = session
        self.say = say
        self.first = runs.next_iteration_number(session.db)
        self.merged: list[str] = []

    def __call__(self, line: str) -> None:
        self.say(line)
        self.check()

    def check(self) -> None:
        from soda.store import history, runs

        latest = runs.next_iteration_number(self.session.db) - 1
        if latest < self.first:
            return
        row = history.iteration(self.session.db, latest)
        commit = row["merged_commit"] if row else None
        if commit and commit not in self.merged:
            self.merged.append(commit)
            self.say(f"merged: {commit} onto {self.session.milestone.branch} (iteration {latest})")


def _drive(
    session: Session, say: Callable[[str], None], once: bool = False
) -> tuple[IterationResult, str | None]:
    """Run the loop, printing the milestone branch first and every merge commit
    as it lands; the result and the last merge commit of this run (or None)."""
    from soda.loop import run_loop

    config = session.config
    tip = session.repo.heads[session.milestone.branch].commit.hexsha
    say(
        f"milestone branch {session.milestone.branch} (from {config.project.base_branch},"
        f" tip {tip[:10]})"
    )
    watch = MergeWatch(session, say)
    result = run_loop(session, watch, once=once)
    watch.check()
    return result, (watch.merged[-1] if watch.merged else None)


def ending_line(result: IterationResult, branch: str, merged: str | None) -> str:
    """The last line of `soda run` and `soda demo`: how the run ended, in words,
    with its exit code. The reason itself was printed by the loop already."""
    from soda.loop import Ending

    n, cmd = result.number, soda_command()
    where = (
        f"; merged {merged[:10]} on {branch}"
        if merged
        else f"; nothing merged on {branch} in this run"
    )
    text = {
        Ending.DONE: f"the spec is met (iteration {n}){where}",
        Ending.CONTINUE: (
            f"iteration {n} finished and the spec is not met yet: more to do{where};"
            f" run `{cmd} run` to go on"
        ),
        Ending.STUCK: f"soda needs a person (the reason is above; `{cmd} show {n}`)",
        Ending.HALT: f"something structural is wrong (`{cmd} show {n}`, table halts)",
        Ending.TRANSIENT: f"a transient failure outlasted the retries; run `{cmd} run` to resume",
        Ending.INTERRUPTED: f"stopped in iteration {n}; run `{cmd} run` to resume",
    }[result.ending]
    return f"{result.ending.name}: {text} (exit {result.ending.exit_code})"


def soda_command() -> str:
    """How a person can run this soda again from a shell: `soda` when that is on
    PATH and is this program, else the running script's absolute path, else
    `PYTHON -m soda`."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is None or argv0.name == "__main__.py" or argv0.suffix == ".py":
        return f"{shlex.quote(sys.executable)} -m soda"
    on_path = shutil.which("soda")
    if on_path and argv0.exists() and Path(on_path).resolve() == argv0.resolve():
        return "soda"
    if argv0.is_file():
        return shlex.quote(str(argv0.absolute()))
    return f"{shlex.quote(sys.executable)} -m soda"


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
    from soda.report import history_table

    target, session = start_demo(directory, _say)
    result, merged = _drive(session, _say)
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


def _say_err(line: str) -> None:
    err.print(line, markup=False)


def main() -> None:
    # Rich wraps to the terminal; keep output stable when piped.
    os.environ.setdefault("COLUMNS", "120")
    app()


# The queue commands (tell, approve, reject, pause, resume, cancel) live in
# soda.cli_queue; importing it here, last, registers them on `app` in this order.
from soda import cli_queue as _cli_queue  # noqa: E402, F401
