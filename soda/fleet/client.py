"""What `soda fleet ...` asks of the Temporal server: submit a run, list runs,
a run's status and history, and the person's inputs as signals.

Status and history are read from the workflow's memo, which the server keeps
itself: they answer while every worker is down. Each input is checked against
the `human_input` contract (as the inbox checks a file) before it is sent; a
verdict must name a waiting plan's iteration or the running one, and an edited
plan is checked against what the run's worker reported (`send_plan_edit`).
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
from soda.fleet.state import (
    SHARED_QUEUE,
    VERDICT_KINDS,
    WORKFLOW_TYPE,
    RunSettings,
    RunState,
    run_id,
)
from soda.human.checks import checked_input, checked_known_plan_edit

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


async def submit(client: Client, settings: RunSettings, task_queue: str = SHARED_QUEUE) -> str:
    """Start the run of this repository and spec; its id. A second submit of the
    same pair while the first runs is refused."""
    ident = run_id(settings.repo_url, settings.spec)
    try:
        await client.start_workflow(
            WORKFLOW_TYPE,
            RunState(settings),
            id=ident,
            task_queue=task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        )
    except WorkflowAlreadyStartedError as exc:
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


async def send(client: Client, run: str, fields: dict[str, Any]) -> HumanInput:
    """Check one input against its contract and signal it to the run."""
    item = checked_input(fields)  # as every face checks it (the worker's inbox does again)
    handle: WorkflowHandle[Any, Any] = client.get_workflow_handle(run)
    described = await describe(client, run)  # a run that does not exist is named, not signalled
    if item.kind in VERDICT_KINDS and item.target is not None:
        verdict_target(described, item.target, item.kind)
    document = item.model_dump(mode="json", exclude_none=True)
    try:
        await handle.signal("human", args=[item.kind, document])
    except RPCError as exc:
        state = (await describe(client, run))["status"]["status"]
        raise InputError(f"fleet run {run} has ended ({state}): {exc.message}") from exc
    return item


def verdict_target(described: dict[str, Any], number: int, kind: str) -> None:
    """Raise InputError unless the run's iteration `number` may take a verdict:
    its plan waits for approval, or it is the running (or next) iteration,
    which may yet ask (as `soda approve` checks a repository's record)."""
    waiting = described.get("approval")
    if waiting and waiting["iteration"] == number:
        return
    latest = int(described["status"].get("iteration") or 0)
    if number == latest + 1:
        return
    verb = "reject" if kind == "reject" else "approve"
    shown = f"iteration {waiting['iteration']}'s plan waits" if waiting else "no plan waits"
    raise InputError(
        f"no iteration {number} of {described['run']} to {verb}: {shown}, and only the"
        f" running iteration ({latest + 1}) can be answered before it asks"
        " (see `soda fleet status`)"
    )


async def send_plan_edit(client: Client, run: str, number: int, text: str) -> HumanInput:
    """Approve iteration `number`'s waiting plan as the person edited it (`text`,
    its JSON), checked as `soda approve --edit` checks an edit: the plan
    contract, then the plan checks against the Trace tasks and `[plan]
    max_tasks` the run's worker reported. An unchanged plan is a plain approve."""
    described = await describe(client, run)
    waiting = described.get("approval")
    if not waiting or waiting["iteration"] != number:
        shown = f"iteration {waiting['iteration']}'s plan waits" if waiting else "no plan waits"
        raise InputError(
            f"no plan of iteration {number} of {run} waits for approval ({shown});"
            " see `soda fleet status`"
        )
    plan = checked_known_plan_edit(text, set(waiting["known_tasks"]), int(waiting["max_tasks"]))
    if plan == IterationPlan.model_validate(waiting["plan"]):
        return await send(client, run, {"kind": "approve", "target": number})
    fields = {"kind": "plan_edit", "target": number, "plan": plan.model_dump(mode="json")}
    return await send(client, run, fields)


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
