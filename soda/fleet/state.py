"""What a fleet run keeps in its workflow: plain dataclasses, no I/O.

The workflow holds decisions and what must outlive any one machine: the run's
settings, the iterations finished (a small summary each, never a transcript),
the person's inputs not yet delivered to a worker, the control flags, the
learnings and the Trace tasks not yet closed (bounded: `MAX_CARRIED_TASKS`,
`MAX_TASK_TEXT`), and where the run is placed. Transcripts and diffs stay in
the worker's SQLite; the git remote holds the code, and (`report_json`) the
report of an iteration that merged.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from soda.contracts.outcomes import FleetStatus
from soda.human.routing import VERDICT_KINDS as VERDICT_KINDS
from soda.system.clock import moment

WORKFLOW_TYPE = "SodaRun"
SHARED_QUEUE = "soda"
"""The task queue every worker polls: workflows and placement."""
PROVENANCE = "fleet"
"""Where the inputs sent through `soda fleet` come from (soda.human.write's
`SOURCES`): each record's `source` says it."""
MAX_HISTORY = 500
"""Finished iterations a run keeps in its state (the oldest drop off)."""
MEMO_HISTORY = 100
"""Finished iterations shown by `soda fleet history` when no worker answers."""
MAX_CARRIED_TASKS = 40
"""Trace tasks a run carries from worker to worker: the root, the unfinished
ones (lowest ids first) and the few last closed."""
MAX_TASK_TEXT = 1000
"""Characters of a carried task's description (its title: 200, its reason: 300)."""
MAX_HEARD = 200
"""Keys of signalled inputs a run remembers, to drop one sent twice."""


@dataclass
class RunSettings:
    """What `soda fleet submit` fixed for the run."""

    repo_url: str
    spec: str | None = None
    """The spec's path in the repository (None: the repository's soda.toml says)."""
    base: str | None = None
    """The base branch (None: the repository's soda.toml says)."""
    config_text: str | None = None
    """A soda.toml to use instead of the repository's (its text)."""
    heartbeat_seconds: float = 30.0
    """A worker that does not heartbeat for this long is taken as lost."""
    place_seconds: float = 60.0
    """An iteration its worker does not start within this long is placed elsewhere."""
    max_iterations: int = 50
    keep_checkout: bool = False
    """Keep the run's clone and record in its worker's cache after the run ends
    (to look into them); by default the worker removes them."""
    spec_text: str | None = None
    """The spec's text, written at `spec` in the clone (ignored by git) when the
    repository does not hold it: an issue's spec from the tracker."""


@dataclass
class HumanSignal:
    """One input from a person, checked as the inbox checks it (`document` is
    the `human_input` contract's JSON), numbered by the workflow."""

    seq: int
    kind: str
    document: dict[str, Any]


@dataclass
class IterationSummary:
    """One finished iteration, whichever worker ran it."""

    number: int
    ending: str
    """done, continue, stuck, halt, transient, interrupted (soda.contracts.outcomes.Ending)."""
    reason: str
    decision: str | None = None
    outcome: str | None = None
    merged_commit: str | None = None
    """The milestone's tip after the iteration's merges, pushed to the remote."""
    tokens: int = 0
    cost_usd: float = 0.0
    worker: str = ""
    seconds: float = 0.0
    """How long `run_iteration` took on the worker, less the pushes after its
    merges (what the fleet adds is the rest)."""


@dataclass
class CarriedTask:
    """One Trace task as the run carries it to its next worker, which recreates
    it with the same id (`soda.fleet.checkout.rebuild`). The root's description
    (the spec) is not carried: the new worker reads the spec itself."""

    id: int
    title: str
    status: str
    """open, in_progress, blocked or closed (soda.contracts.outcomes.TaskStatus)."""
    parent_id: int | None = None
    description: str = ""
    reason: str | None = None
    risk: str = "low"


@dataclass
class ApprovalWait:
    """A plan (or merges the gate may not make alone) that waits for a person's
    approval, held by the workflow (a durable timer, no worker): what a worker
    needs to go on with it, wherever it runs."""

    iteration: int
    """The iteration whose plan (or merge) waits: `soda fleet approve|reject RUN N`
    name it."""
    plan: dict[str, Any]
    """The plan (contract `plan`), as small as ORIENT made it; for held merges,
    the plan of their tasks."""
    timeout: float
    deadline: float
    """Seconds since the epoch; the workflow's timer fires then."""
    known_tasks: list[int] = field(default_factory=list)
    """The milestone's Trace task ids: an edit may name these (checked by the client)."""
    max_tasks: int = 8
    """`[plan] max_tasks` of the run's config (an edit may have no more)."""
    expired: bool = False
    """The timer fired with no verdict: the next iteration rejects the plan."""
    kind: str = "plan"
    """plan, or merge: merges held for a person (soda.loop.act.held)."""
    what: str = "plan"
    """What waits, as `soda fleet status` names it: the plan, or the merge of task T."""
    merges: list[dict[str, Any]] = field(default_factory=list)
    """For held merges: each task's kept merge (its commit under
    refs/soda/approvals/, which the worker pushed; the gate's reason and items)."""


@dataclass
class IterationRequest:
    """What the workflow hands the worker for one iteration."""

    workflow_id: str
    settings: RunSettings
    number: int
    fresh: bool
    """Rebuild the worker's record from `history` (a new placement, or a failed
    attempt whose local record cannot be trusted)."""
    history: list[IterationSummary]
    pending: list[HumanSignal]
    learnings: list[str]
    approval: ApprovalWait | None = None
    """The plan that waits for approval, if one does (a fresh worker keeps it again)."""
    tasks: list[CarriedTask] = field(default_factory=list)
    """The Trace tasks the run carries (a fresh worker recreates them)."""
    token: str = ""
    """The run's `RunState.token`: a report on the remote is this run's only if it says so."""


@dataclass
class IterationReport:
    """What the worker hands back: the summary and what the workflow must keep."""

    summary: IterationSummary
    delivered: list[int]
    """`seq`s of the person's inputs written to the worker's inbox."""
    learnings: list[str]
    open_tasks: int
    waiting_for: str | None
    """A question the run waits for, in one line."""
    approval: ApprovalWait | None = None
    """The plan that waits for approval after this iteration, if one does."""
    tasks: list[CarriedTask] = field(default_factory=list)
    """The Trace tasks after the iteration, bounded (what the next worker recreates)."""


@dataclass
class Placement:
    worker: str
    queue: str


@dataclass
class RunState:
    """The workflow's whole state, carried across continue-as-new."""

    settings: RunSettings
    history: list[IterationSummary] = field(default_factory=list)
    pending: list[HumanSignal] = field(default_factory=list)
    next_seq: int = 1
    learnings: list[str] = field(default_factory=list)
    open_tasks: int = 0
    tasks: list[CarriedTask] = field(default_factory=list)
    placement: Placement | None = None
    kept_on: Placement | None = None
    """The worker whose cache holds the run's checkout while the run waits (told
    to forget it when the run ends)."""
    token: str = ""
    """The first execution's Temporal run id: tells this run apart from an
    earlier one of the same id (submitted again after it ended)."""
    fresh: bool = True
    paused: bool = False
    stopping: bool = False
    waiting_for: str | None = None
    """Set after STUCK or HALT: the run waits for a person (no worker held)."""
    approval: ApprovalWait | None = None
    """A plan that waits for approval: the run waits for the verdict or the
    timeout (no worker held)."""
    window_opens: float | None = None
    """Set while the run's working windows (`[daemon] windows`) are closed: when
    the next opens (seconds since the epoch; no worker held meanwhile)."""
    moves: int = 0
    """Times the run was placed again after losing its worker."""
    heard: list[str] = field(default_factory=list)
    """The keys of the last inputs signalled with one (`MAX_HEARD`): a second
    signal of a key is dropped (a sender cut short between its signal and its own
    record sends it again)."""
    tokens: int = 0
    cost_usd: float = 0.0

    @property
    def last_number(self) -> int:
        return self.history[-1].number if self.history else 0


def run_id(repo_url: str, spec: str | None) -> str:
    """The workflow id of a repository and spec: readable, and the same for the
    same pair (a second submit is refused, never a duplicate)."""
    name = repo_url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")
    slug = re.sub(r"[^a-z0-9]+", "-", f"{name}-{spec or 'default'}".lower()).strip("-")
    digest = hashlib.sha256(f"{repo_url}\0{spec or ''}".encode()).hexdigest()[:10]
    return f"soda-{slug[:40]}-{digest}"


def status_of(state: RunState, status: FleetStatus) -> dict[str, Any]:
    """What `soda fleet status` shows, kept in the workflow's memo so the server
    answers it with every worker down."""
    last = state.history[-1] if state.history else None
    return {
        "status": status,
        "repo_url": state.settings.repo_url,
        "spec": state.settings.spec,
        "iteration": state.last_number,
        "worker": state.placement.worker if state.placement else None,
        "waiting_for": state.waiting_for
        or (waiting_line(state.approval) if status is FleetStatus.WAITING else None)
        or (window_line(state.window_opens) if status is FleetStatus.WAITING else None),
        "approval_deadline": moment(state.approval.deadline) if state.approval else None,
        "paused": state.paused,
        "pending_inputs": len(state.pending),
        "last_decision": last.decision if last else None,
        "last_reason": last.reason if last else None,
        "tokens": state.tokens,
        "cost_usd": round(state.cost_usd, 6),
        "max_iterations": state.settings.max_iterations,
        "open_tasks": state.open_tasks,
        "moves": state.moves,
    }


def waiting_line(approval: ApprovalWait | None) -> str | None:
    if approval is None:
        return None
    what = f"approval of iteration {approval.iteration}'s {approval.what}"
    if approval.expired:
        return f"{what}: timed out, rejecting it"
    return (
        f"{what} until {moment(approval.deadline)}"
        f" (soda fleet approve|reject RUN {approval.iteration})"
    )


def window_line(opens: float | None) -> str | None:
    if opens is None:
        return None
    return f"the next working window, at {moment(opens)} (daemon.windows)"


def approval_memo(state: RunState) -> dict[str, Any] | None:
    """The waiting plan as `soda fleet status --json` shows it (and the client
    checks an edit against), kept in the memo beside the status."""
    return vars(state.approval) if state.approval else None


def history_rows(state: RunState) -> list[dict[str, Any]]:
    return [vars(item) for item in state.history[-MEMO_HISTORY:]]


def report_json(report: IterationReport, token: str) -> bytes:
    """The report as the remote keeps it beside the milestone (with the run's token)."""
    return json.dumps({"token": token, **asdict(report)}, indent=1).encode()


def report_from_json(data: bytes, token: str) -> IterationReport | None:
    """The report `report_json` wrote, if it is this run's (and readable)."""
    try:
        raw = json.loads(data)
        if raw.pop("token", None) != token or not token:
            return None
        summary = IterationSummary(**raw.pop("summary"))
        tasks = [CarriedTask(**task) for task in raw.pop("tasks", [])]
        waiting = raw.pop("approval", None)
        approval = ApprovalWait(**waiting) if waiting else None
        return IterationReport(summary=summary, tasks=tasks, approval=approval, **raw)
    except (ValueError, TypeError, AttributeError, KeyError):
        return None
