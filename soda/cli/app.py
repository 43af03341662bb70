"""What every command shares: the typer `app`, the consoles, `handled` (soda's
errors as one line and an exit code: the only place that translates them, see
`soda.errors`), the `Project` a command works on, and what the queue commands
share: `record_of` (what the project's database says of its run) and `queue`
(one checked input, built by `soda.human.commands`, written to the inbox).
Command modules import this; `soda.cli.main` imports the command modules, so
registering a command is importing its module.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console

from soda import __version__
from soda.config import Config, find_config, load
from soda.errors import SodaError
from soda.llm.providers import check_provider
from soda.store import Database, open_db

if TYPE_CHECKING:
    from soda.human.checks import DatabaseRecord
    from soda.human.commands import Provenance, Said

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
        """soda.toml, loaded and checked (its provider against soda.llm.providers)."""
        if self._config is None:
            self._config = check_provider(load(find_config(self.directory)))
        return self._config

    @property
    def db(self) -> Database:
        if self._db is None:
            self._db = open_db(self.config.db_path)
        return self._db


def project_of(ctx: typer.Context) -> Project:
    """The project the root callback made for this invocation."""
    project: Project = ctx.obj
    return project


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


def say(line: str) -> None:
    out.print(line, markup=False)


def say_err(line: str) -> None:
    err.print(line, markup=False)


def by_cli() -> Provenance:
    """The provenance of what a CLI command says: the local person, through the CLI."""
    from soda.human.commands import Face, Provenance

    return Provenance(Face.CLI)


def record_of(ctx: typer.Context) -> DatabaseRecord:
    """What the project's database says of its run (`soda.human.commands.RunRecord`)."""
    from soda.human.checks import DatabaseRecord

    project = project_of(ctx)
    return DatabaseRecord(project.db, project.config)


def queue(ctx: typer.Context, said: Said) -> None:
    """Write one checked input to the inbox and say so (and its note, if any)."""
    from soda.human.commands import queue as deliver

    path = deliver(project_of(ctx).config.state_dir, said)
    out.print(f"queued {said.line()}  ({path.name})", markup=False)
    if said.note:
        out.print(said.note, markup=False)
