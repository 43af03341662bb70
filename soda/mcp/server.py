"""The tools of `soda mcp serve`, and the stdio server that offers them.

What a person reads: `status`, `history`, `show_iteration`, `tasks`, `cost`,
`events` (since an event id), `plan_to_edit`. What a person does: `tell`,
`answer`, `approve`, `reject`, `edit_plan`, `pause`, `resume`, `stop`. Each
write is built by `soda.human.commands` exactly as the CLI's and the web's
are (the repository's record: `soda.human.checks.DatabaseRecord`) and written
to the inbox, its provenance `mcp:CLIENT`, CLIENT the name the client gave in
its handshake. A refusal (`InputError`: an iteration that waits for nobody, a
bad plan edit) is a tool error with its one line, and writes nothing; an
argument of the wrong type is refused by the SDK, naming the argument.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from sqlite_utils import Database

from soda.config import Config
from soda.errors import SodaError
from soda.human import commands
from soda.human.checks import DatabaseRecord
from soda.human.commands import Face, Provenance, Said
from soda.human.routing import Control
from soda.store import events as event_rows
from soda.trace import SqliteTracker

Report = Callable[[], dict[str, Any]]
T = TypeVar("T")
MAX_EVENTS = 500
"""The most events one `events` call returns; ask again from its `last_id`."""
READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
INSTRUCTIONS = (
    "soda is an autonomous coding daemon working on one git repository toward its spec."
    " Read what it does (status, history, show_iteration, tasks, cost, events) and say"
    " what the person says (tell, answer, approve, reject, edit_plan, pause, resume, stop)."
    " Every write is queued for soda's next step; only act on the person's explicit request."
)


@dataclass(frozen=True)
class Reports:
    """The JSON the CLI's read commands print, computed by their own code (they
    live above this room): the tools say what `soda status`, `history`, `show`
    and `cost` say."""

    status: Report
    history: Callable[[int], dict[str, Any]]
    iteration: Callable[[int], dict[str, Any]]
    """InputError when there is no such iteration."""
    cost: Report


@dataclass(frozen=True)
class Served:
    """One server's world: the repository it serves, as long as the process lives."""

    config: Config
    db: Database
    milestone: str
    reports: Reports

    def record(self) -> DatabaseRecord:
        return DatabaseRecord(self.db, self.config)


def provenance(ctx: Context[Any, Any]) -> Provenance:
    """Face `mcp`, and who: the client's name from its handshake (if it gave one)."""
    params = ctx.session.client_params
    name = params.client_info.name if params is not None else None
    return Provenance(Face.MCP, name or None)


def _queued(served: Served, said: Said) -> dict[str, Any]:
    path = commands.queue(served.config.state_dir, said)
    return {"queued": said.line(), "note": said.note, "file": path.name}


def _refusing(work: Callable[[], T]) -> T:
    """`work()`, soda's errors turned into a tool error (their one line)."""
    try:
        return work()
    except SodaError as exc:
        raise ToolError(str(exc)) from None


def build(served: Served) -> MCPServer[Any]:
    """The server and its tools for `served`'s repository."""
    server: MCPServer[Any] = MCPServer(
        "soda", title="soda", instructions=INSTRUCTIONS, log_level="WARNING"
    )

    def say(ctx: Context[Any, Any], make: Callable[[Provenance], Said]) -> dict[str, Any]:
        by = provenance(ctx)
        return _refusing(lambda: _queued(served, make(by)))

    @server.tool(annotations=READ)
    def status() -> dict[str, Any]:
        """What soda is doing on this repository now: whether it runs, the current
        iteration and agent, a plan or merge waiting for approval, open questions,
        budgets and the last error (what `soda status --json` prints)."""
        return _refusing(served.reports.status)

    @server.tool(annotations=READ)
    def history(limit: int = 20) -> dict[str, Any]:
        """The latest `limit` iterations (1-500), newest first: number, outcome,
        decision, times and cost (what `soda history --json` prints)."""
        if not 1 <= limit <= 500:
            raise ToolError(f"limit: {limit} is out of range (1 to 500)")
        return _refusing(lambda: served.reports.history(limit))

    @server.tool(annotations=READ)
    def show_iteration(number: int) -> dict[str, Any]:
        """One iteration in full: its claims, plan, tasks' results, steps, the
        person's inputs it applied and its model calls (`soda show N --json`)."""
        return _refusing(lambda: served.reports.iteration(number))

    @server.tool(annotations=READ)
    def tasks(
        status: Literal["open", "in_progress", "blocked", "closed"] | None = None,
    ) -> dict[str, Any]:
        """The milestone's Trace tasks (only those with `status`, if given)."""
        items = SqliteTracker(served.db, served.milestone).list(status)
        rows = [{k: v for k, v in asdict(t).items() if k != "milestone"} for t in items]
        return {"milestone": served.milestone, "tasks": rows}

    @server.tool(annotations=READ)
    def cost() -> dict[str, Any]:
        """What the model calls cost: per iteration, agent and model, and in total."""
        return _refusing(served.reports.cost)

    @server.tool(annotations=READ)
    def events(since: int = 0, kind: str | None = None, limit: int = 100) -> dict[str, Any]:
        """soda's events after event id `since` (0: from the start), oldest first,
        at most `limit` (1-500); `kind` keeps those whose kind starts with it (e.g.
        "act"). Ask again with the answer's `last_id` for what came after."""
        if since < 0:
            raise ToolError(f"since: {since} is not an event id (0 or more)")
        if not 1 <= limit <= MAX_EVENTS:
            raise ToolError(f"limit: {limit} is out of range (1 to {MAX_EVENTS})")
        rows = event_rows.after(served.db, since, kind, limit)
        last = rows[-1][0] if rows else since
        return {"events": [event_rows.as_record(row) for row in rows], "last_id": last}

    @server.tool(annotations=READ)
    def plan_to_edit(iteration: int) -> dict[str, Any]:
        """The plan iteration `iteration` waits with, as JSON to edit and pass to
        `edit_plan` (refused if it waits for nothing, or waits with a merge)."""
        plan = _refusing(lambda: commands.plan_to_edit(served.record(), iteration))
        return plan.model_dump(mode="json")

    @server.tool(annotations=WRITE)
    def tell(
        text: str,
        ctx: Context[Any, Any],
        kind: str | None = None,
        mode: Literal["replace", "amend"] | None = None,
        action: Literal["skip", "prioritise", "reopen", "close", "constraint"] | None = None,
        task_id: int | None = None,
    ) -> dict[str, Any]:
        """Tell soda something the person wants it to know; it reads it at its next
        SENSE. A correction by default; a spec_change (`mode` replace or amend); an
        override (`action` on Trace task `task_id`, or a constraint in `text`)."""
        return say(
            ctx, lambda by: commands.tell(by, text, kind, mode=mode, action=action, task_id=task_id)
        )

    @server.tool(annotations=WRITE)
    def answer(question: int, text: str, ctx: Context[Any, Any]) -> dict[str, Any]:
        """Answer open question `question` (its id in `status`'s questions)."""
        return say(ctx, lambda by: commands.answer(served.record(), by, question, text))

    @server.tool(annotations=WRITE)
    def approve(iteration: int, ctx: Context[Any, Any]) -> dict[str, Any]:
        """Approve the plan (or held merge) iteration `iteration` waits with."""
        return say(ctx, lambda by: commands.approve(served.record(), by, iteration))

    @server.tool(annotations=WRITE)
    def reject(iteration: int, ctx: Context[Any, Any], reason: str | None = None) -> dict[str, Any]:
        """Reject the plan (or held merge) iteration `iteration` waits with; the
        `reason` goes to the next plan."""
        return say(ctx, lambda by: commands.reject(served.record(), by, iteration, reason))

    @server.tool(annotations=WRITE)
    def edit_plan(iteration: int, plan: str, ctx: Context[Any, Any]) -> dict[str, Any]:
        """Approve iteration `iteration`'s waiting plan as edited: `plan` is its
        JSON (start from `plan_to_edit`). A bad edit is refused with the reason,
        the original plan still waiting."""
        return say(ctx, lambda by: commands.edit(served.record(), by, iteration, plan))

    @server.tool(annotations=WRITE)
    def pause(ctx: Context[Any, Any]) -> dict[str, Any]:
        """Pause soda after its current iteration."""
        return say(ctx, lambda by: commands.control(by, Control.PAUSE))

    @server.tool(annotations=WRITE)
    def resume(ctx: Context[Any, Any]) -> dict[str, Any]:
        """Resume a paused soda."""
        return say(ctx, lambda by: commands.control(by, Control.RESUME))

    @server.tool(annotations=WRITE)
    def stop(ctx: Context[Any, Any]) -> dict[str, Any]:
        """Stop soda after its current iteration."""
        return say(ctx, lambda by: commands.control(by, Control.STOP))

    return server


def serve(served: Served) -> None:
    """Serve `served` over stdin and stdout until the client goes away."""
    build(served).run("stdio")
