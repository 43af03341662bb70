"""What `soda fleet ...` asks of the Temporal server: submit a run, list runs,
a run's status and history, and the person's inputs as signals.

Status and history are read from the workflow's memo, which the server keeps
itself: they answer while every worker is down. A person's input is built and
checked by `soda.human.commands` as every face's is, against what the memo says
of the run (`MemoRecord`: a verdict must name the waiting plan's iteration or
the running one; an edited plan is checked against the Trace tasks and `[plan]
max_tasks` the run's worker reported), then sent as a signal (`signal`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowHandle,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import TemporalError, WorkflowAlreadyStartedError
from temporalio.service import RPCError

from soda.contracts import HumanInput, IterationPlan
from soda.errors import InputError, TransientError
from soda.fleet.state import SHARED_QUEUE, WORKFLOW_TYPE, RunSettings, RunState, run_id
from soda.human.approval import known_edit_problems
from soda.human.commands import Face, Provenance, Said, Started, Waiting

T = TypeVar("T")


def call(address: str, namespace: str, ask: Callable[[Client], Awaitable[T]]) -> T:
    """Connect and run `ask(client)` to its end; what Temporal says is wrong
    becomes one line (a SodaError), never a traceback."""

    async def go() -> T:
        return await ask(await connect(address, namespace))

    try:
        return asyncio.run(go())
    except RPCError as exc:
        raise TransientError(f"Temporal at {address}: {exc.message}") from exc
    except TemporalError as exc:
        raise TransientError(f"Temporal at {address}: {exc}") from exc


async def connect(address: str, namespace: str = "default") -> Client:
    """A client of the server at `address`; one line naming it when it is not there."""
    try:
        return await Client.connect(address, namespace=namespace)
    except RuntimeError as exc:
        raise TransientError(f"no Temporal server at {address} ({exc})") from exc


async def start(
    client: Client, settings: RunSettings, task_queue: str = SHARED_QUEUE, again: bool = True
) -> str:
    """Start the run of this repository and spec; its id. WorkflowAlreadyStartedError
    while a run of the pair goes on; `again`: a pair whose run ended may run again
    (False: an id is started once, ever)."""
    ident = run_id(settings.repo_url, settings.spec)
    reuse = (
        WorkflowIDReusePolicy.ALLOW_DUPLICATE if again else WorkflowIDReusePolicy.REJECT_DUPLICATE
    )
    await client.start_workflow(
        WORKFLOW_TYPE,
        RunState(settings),
        id=ident,
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
        id_reuse_policy=reuse,
    )
    return ident


async def submit(client: Client, settings: RunSettings, task_queue: str = SHARED_QUEUE) -> str:
    """Start the run of this repository and spec; its id. A second submit of the
    same pair while the first runs is refused."""
    try:
        ident = await start(client, settings, task_queue)
    except WorkflowAlreadyStartedError as exc:
        ident = run_id(settings.repo_url, settings.spec)
        raise InputError(
            f"{settings.repo_url} (spec {settings.spec or 'default'}) already runs as {ident}"
            " (see `soda fleet status`)"
        ) from exc
    return ident


async def runs(client: Client) -> list[dict[str, Any]]:
    """Every soda run the server knows, newest first, with what its memo says."""
    rows = []
    seen: set[str] = set()
    query = f"WorkflowType = '{WORKFLOW_TYPE}' AND ExecutionStatus != 'ContinuedAsNew'"
    async for item in client.list_workflows(query):
        if item.id in seen:  # an older run of the same id (submitted again after it ended)
            continue
        seen.add(item.id)
        memo = await item.memo()
        status = dict(memo.get("status") or {})
        status.setdefault("status", "starting")
        if item.status is not None and item.status != WorkflowExecutionStatus.RUNNING:
            status["status"] = _ended(item.status, status.get("status"))
        rows.append({"run": item.id, **status})
    return rows


async def describe(client: Client, run: str) -> dict[str, Any]:
    """The run's status and history as the server keeps them (no worker needed)."""
    handle = client.get_workflow_handle(run)
    try:
        description = await handle.describe()
    except RPCError as exc:
        raise InputError(f"no fleet run {run!r} (see `soda fleet list`)") from exc
    memo = await description.memo()
    status = dict(memo.get("status") or {"status": "starting"})
    status["phase"] = await _phase(client, description)
    if description.status is not None and description.status != WorkflowExecutionStatus.RUNNING:
        status["status"] = _ended(description.status, status.get("status"))
    history = list(memo.get("history") or [])
    return {"run": run, "status": status, "history": history, "approval": memo.get("approval")}


BY = Provenance(Face.FLEET)
"""What `soda fleet` says comes through the fleet (its worker records it so)."""


async def record_of(client: Client, run: str) -> MemoRecord:
    """What the server's memo says of `run` (InputError if there is no such run)."""
    return MemoRecord(await describe(client, run))


async def signal(client: Client, run: str, said: Said) -> HumanInput:
    """Send one checked input to the run (the worker's inbox checks it again)."""
    item = said.item
    handle: WorkflowHandle[Any, Any] = client.get_workflow_handle(run)
    document = item.model_dump(mode="json", exclude_none=True)
    try:
        await handle.signal("human", args=[item.kind, document])
    except RPCError as exc:
        state = (await describe(client, run))["status"]["status"]
        raise InputError(f"fleet run {run} has ended ({state}): {exc.message}") from exc
    return item


class MemoRecord:
    """A fleet run as its memo shows it (`soda.human.commands.RunRecord`): the
    iterations finished, the running one, the plan that waits."""

    def __init__(self, described: dict[str, Any]) -> None:
        self.described = described
        self.run = f" of {described['run']}"
        status = described["status"]
        self.finished = int(status.get("iteration") or 0)
        self.running = status.get("status") == "running"
        """An iteration runs on a worker: it is the only one a verdict may name
        before it asks (the workflow hands a verdict to its own iteration only)."""

    def look(self, number: int | None = None) -> str:
        return "`soda fleet status`"

    def waiting(self) -> Waiting | None:
        waiting = self.described.get("approval")
        if not waiting:
            return None
        plan = IterationPlan.model_validate(waiting["plan"])
        kind = str(waiting.get("kind") or "plan")
        return Waiting(int(waiting["iteration"]), kind, str(waiting.get("what") or kind), plan)

    def latest(self) -> int:
        return self.finished + 1 if self.running else self.finished

    def takes_next(self) -> bool:
        return not self.running

    def started(self, number: int) -> Started:
        if number > self.finished:
            return Started(None)  # the running iteration (it would wait, had it asked)
        for row in self.described.get("history") or []:
            if row.get("number") == number:
                return Started(str(row.get("outcome") or row.get("decision") or row["ending"]))
        return Started("ended")

    def running_plan(self, number: int) -> IterationPlan | None:
        return None  # a fleet run's plan waits with no worker, as `waiting`

    def edit_problems(self, plan: IterationPlan) -> list[str]:
        waiting = self.described.get("approval") or {}
        known = set(waiting.get("known_tasks") or [])
        return known_edit_problems(plan, known, int(waiting.get("max_tasks") or 0))

    def question(self, question_id: int) -> str | None:
        return None  # the memo keeps no questions: the worker checks the answer


async def _phase(client: Client, description: WorkflowExecutionDescription) -> str | None:
    """The running iteration's phase, from its last heartbeat (kept by the server)."""
    for pending in description.raw_description.pending_activities:
        if pending.activity_type.name != "iterate" or not pending.HasField("heartbeat_details"):
            continue
        details = await client.data_converter.decode(pending.heartbeat_details.payloads)
        return str(details[0]) if details else None
    return None


def _ended(status: WorkflowExecutionStatus, memo_status: Any) -> str:
    if status == WorkflowExecutionStatus.COMPLETED:
        return str(memo_status or "completed")
    return status.name.lower()
