"""Typed mirrors of the JSON Schema contracts in `schemas/`, and the one validator.

Every document that crosses a boundary (SENSE -> ORIENT, agent -> orchestrator,
person -> inbox) has a contract: a JSON Schema file that a person or a model can
read, and a pydantic model the code uses. The files are generated from the models
(`python -m soda.contracts` rewrites them) and a test fails if they drift apart.

The schemas are written to be accepted as they are by model APIs' structured
output: every object is closed (`additionalProperties: false`), there are no
open dictionaries and no numeric or length constraints. Agent answers make
every field required (nullable where it may be empty), as strict modes demand.

`validate(name, data)` returns the typed object or a `Violation` naming the JSON
path, the failing rule and the offending value; the loop HALTs on the latter.
"""

from __future__ import annotations

import json
import sys
from functools import cache
from pathlib import Path
from typing import Any, Literal, TypeVar

import jsonschema
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from soda.config import Risk
from soda.errors import InputError, Violation
from soda.resources import resource_dir


class Contract(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


T = TypeVar("T", bound="Contract")

Confidence = Literal["high", "medium", "low"]

# --- plan -------------------------------------------------------------------


class PlanTask(Contract):
    id: str
    """Key of this task inside the plan, used by depends_on (e.g. "a", "b")."""
    task_id: int | None
    """The Trace task this works on, or null to create a new Trace task for it."""
    title: str
    """Short imperative title."""
    description: str
    """What to do and how to know it is done, concrete enough to act on alone."""
    depends_on: list[str]
    """Keys of plan tasks that must complete first."""
    risk: Risk
    """How much damage a mistake here could do: none, low, medium, high, critical."""
    tool_hints: list[str]
    """Tools or commands likely to help (e.g. "run_command: pytest -q tests/test_x.py")."""


class IterationPlan(Contract):
    intent: str
    """One sentence: what this iteration will achieve."""
    approach: str
    """How, in a few sentences; test first."""
    tasks: list[PlanTask]
    """The work, as a small DAG through depends_on."""


# --- orient -----------------------------------------------------------------


class TaskUpdate(Contract):
    task_id: int
    """Trace task to update."""
    action: Literal["close", "block", "unblock", "comment"]
    """close: verified done in code; block: cannot proceed; unblock: blocker no longer
    holds; comment: note only."""
    reason: str
    """Evidence from the code (file, test, command output), not from the claims."""


class NewTask(Contract):
    title: str
    """Short imperative title."""
    description: str
    """What to do and the acceptance check."""
    parent_id: int | None
    """Parent Trace task, or null for a child of the milestone root."""
    risk: Risk
    """Risk of the change."""


class Gap(Contract):
    description: str
    """What the spec asks that the code does not yet do."""
    severity: Literal["blocking", "important", "minor"]
    """blocking: spec cannot be met without it."""


class ClaimCheck(Contract):
    claim: str
    """The claim as SENSE reported it."""
    holds: bool
    """Whether the code confirms it."""
    evidence: str
    """What you looked at (file, command) and what it showed."""


class Verification(Contract):
    """Verifier output: which claims hold in the code, and task states to correct."""

    checks: list[ClaimCheck]
    """Claims checked against the code."""
    task_updates: list[TaskUpdate]
    """Trace corrections the code justifies."""
    learnings: list[str]
    """Short facts about this codebase worth remembering next iteration."""
    summary: str
    """Two or three sentences on the verified state of the work."""


class Assessment(Contract):
    """Assessor output: is the spec met, and what is missing."""

    spec_satisfied: bool | Literal["unverifiable"]
    """true only when every acceptance criterion is met and shown by tests."""
    confidence: Confidence
    """How sure, given the evidence gathered."""
    gaps: list[Gap]
    """What remains between the code and the spec."""
    summary: str
    """Two or three sentences for a person: where the work stands."""


class Planning(Contract):
    """Planner output: new tasks and the plan for this iteration."""

    actionable_work_exists: bool
    """false when nothing can be done without a person."""
    new_tasks: list[NewTask]
    """Trace tasks for gaps no existing task covers."""
    iteration_plan: IterationPlan | None
    """The plan, or null when there is no actionable work."""
    stuck_reason: str | None
    """When there is no actionable work: what a person must do or decide."""
    learnings: list[str]
    """Short facts worth remembering."""


class Orientation(Contract):
    """The combined ORIENT result that DECIDE and ACT consume."""

    spec_satisfied: bool | Literal["unverifiable"]
    """true only when every acceptance criterion is met and shown by tests."""
    actionable_work_exists: bool
    """false when nothing can be done without a person."""
    confidence: Confidence
    """How sure, given the evidence gathered."""
    summary: str
    """Where the work stands, for a person."""
    task_updates: list[TaskUpdate]
    """Trace corrections the code justifies."""
    new_tasks: list[NewTask]
    """Trace tasks for uncovered gaps."""
    gaps: list[Gap]
    """What remains between the code and the spec."""
    iteration_plan: IterationPlan | None
    """The plan, or null when done or stuck."""
    stuck_reason: str | None
    """When there is no actionable work: what a person must do or decide."""
    learnings: list[str]
    """Short facts worth remembering."""


# --- execute ----------------------------------------------------------------


class BlockedTask(Contract):
    task_id: int
    """Trace task that could not be finished."""
    reason: str
    """What stands in the way and what would clear it."""


class TaskComment(Contract):
    task_id: int
    """Trace task the comment belongs to."""
    comment: str
    """What was done or found."""


class NewSubtask(Contract):
    title: str
    """Short imperative title."""
    description: str
    """What to do."""
    parent_id: int
    """The Trace task it splits off from."""


class ExecuteResult(Contract):
    """Executor output, given through the `submit` tool."""

    tasks_completed: list[int]
    """Trace task ids finished, with tests passing."""
    tasks_blocked: list[BlockedTask]
    """Tasks that could not be finished, with reasons."""
    task_comments: list[TaskComment]
    """Notes for Trace."""
    new_subtasks: list[NewSubtask]
    """Follow-up work discovered."""
    learnings: list[str]
    """Short facts worth remembering."""
    summary: str
    """What changed, in two or three sentences (used as the commit message body)."""


# --- claims -----------------------------------------------------------------


class Commit(Contract):
    sha: str
    subject: str
    author: str
    date: str


class CodeClaims(Contract):
    branch: str
    """Milestone branch soda works on."""
    head: str
    """Commit at the tip of the milestone branch."""
    base_commit: str
    """Commit the milestone started from."""
    uncommitted: list[str]
    """Paths with uncommitted changes in the user's checkout (capped)."""
    commits: list[Commit]
    """Commits since the milestone base, newest first (capped)."""
    commits_total: int
    """How many commits there are since the base, capped list or not."""
    files_changed: list[str]
    """Files changed since the base (capped)."""
    diffstat: str
    """`git diff --stat` since the base (capped)."""


class TaskBrief(Contract):
    id: int
    title: str
    status: str
    reason: str | None
    """Why it is blocked or closed, when it is."""
    parent_id: int | None


class CommentBrief(Contract):
    task_id: int
    author: str
    body: str
    created_at: str


class WorkClaims(Contract):
    root: TaskBrief | None
    """The milestone's root task (the spec)."""
    open: list[TaskBrief]
    in_progress: list[TaskBrief]
    blocked: list[TaskBrief]
    recently_closed: list[TaskBrief]
    comments: list[CommentBrief]
    """Most recent comments, newest first."""


class IterationBrief(Contract):
    number: int
    intent: str | None
    decision: str | None
    outcome: str | None
    summary: str | None


class LoopStatus(Contract):
    detected: bool
    """True when the same intent ended the same way too often in the window."""
    detail: str
    """Which intent repeated and how often."""


class BudgetStatus(Contract):
    cost_usd: float
    """Spent in this run so far."""
    max_cost_usd: float
    tokens_this_iteration: int
    max_tokens_per_iteration: int


class ProjectClaims(Contract):
    iteration: int
    """Number of the iteration being planned."""
    max_iterations: int
    recent: list[IterationBrief]
    """Most recent iterations, newest first."""
    loop: LoopStatus
    budget: BudgetStatus
    learnings: list[str]
    """Active learnings, newest first (capped)."""


class HumanItem(Contract):
    id: int
    kind: str
    text: str
    """The person's words, or a rendering of a structured input."""
    received_at: str


class HumanClaims(Contract):
    pending: list[HumanItem]
    """Unapplied inputs from the queue, oldest first."""
    paused: bool
    """A person asked soda to pause."""


class Claims(Contract):
    """What the systems say at the start of an iteration: unverified."""

    code: CodeClaims
    work: WorkClaims
    project: ProjectClaims
    human: HumanClaims


# --- human input ------------------------------------------------------------

HumanKind = Literal[
    "correction",
    "override",
    "spec_change",
    "approve",
    "reject",
    "pause",
    "resume",
    "stop",
    "cancel",
]


class HumanInput(Contract):
    """What a person drops into state/inbox/ (or says through `soda tell`)."""

    kind: HumanKind
    """correction: guidance in `text`; override: `action` on `task_id` (or a
    constraint in `text`); spec_change: new spec text (`mode` replace or amend);
    approve / reject: `target` plan or iteration id; pause, resume, stop, cancel:
    control the loop."""
    text: str | None = None
    """Free text: the correction, the constraint, the new spec, or a reason."""
    action: Literal["skip", "prioritise", "reopen", "close", "constraint"] | None = None
    """For override: what to do with the task (constraint adds a rule in `text`)."""
    task_id: int | None = None
    """For override: the Trace task."""
    target: int | None = None
    """For approve / reject: the iteration whose plan is meant."""
    mode: Literal["replace", "amend"] | None = None
    """For spec_change: replace the spec with `text`, or append `text` to it."""

    @model_validator(mode="after")
    def _fields_for_kind(self) -> HumanInput:
        need: dict[str, tuple[str, ...]] = {
            "correction": ("text",),
            "spec_change": ("text",),
            "approve": ("target",),
            "reject": ("target",),
            "override": ("action",),
        }
        for name in need.get(self.kind, ()):
            if getattr(self, name) is None:
                raise ValueError(f"kind {self.kind!r} needs {name!r}")
        if self.kind == "override":
            if self.action == "constraint" and not self.text:
                raise ValueError("override action 'constraint' needs 'text'")
            if self.action != "constraint" and self.task_id is None:
                raise ValueError(f"override action {self.action!r} needs 'task_id'")
        return self


CONTRACTS: dict[str, type[Contract]] = {
    "claims": Claims,
    "verification": Verification,
    "assessment": Assessment,
    "planning": Planning,
    "orient": Orientation,
    "plan": IterationPlan,
    "execute": ExecuteResult,
    "human_input": HumanInput,
}


# --- schema files -----------------------------------------------------------


def generate_schema(name: str) -> dict[str, Any]:
    """The JSON Schema for contract `name`, as it is written to schemas/NAME.json."""
    model = CONTRACTS[name]
    schema = _strip_titles(model.model_json_schema(mode="validation"))
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"urn:soda:contract:{name}",
        "title": name,
        **schema,
    }


def _strip_titles(node: Any) -> Any:
    """Drop pydantic's generated titles: noise for readers and for models."""
    if isinstance(node, dict):
        return {
            key: _strip_titles(value)
            for key, value in node.items()
            if not (key == "title" and isinstance(value, str))
        }
    if isinstance(node, list):
        return [_strip_titles(item) for item in node]
    return node


def schema_path(name: str) -> Path:
    return resource_dir("schemas") / f"{name}.json"


@cache
def load_schema(name: str) -> dict[str, Any]:
    """The contract file for `name`; InputError naming the known ones if unknown."""
    if name not in CONTRACTS:
        raise InputError(f"unknown contract {name!r}; known: {', '.join(sorted(CONTRACTS))}")
    return json.loads(schema_path(name).read_text(encoding="utf-8"))


# --- validation -------------------------------------------------------------


def validate(name: str, data: Any, model: type[T] | None = None) -> T | Violation:
    """Check `data` against contract `name`: the typed object, or the first violation.

    The JSON Schema file is checked first (it is what a model was told), then the
    pydantic model (which adds cross-field rules such as HumanInput's per-kind needs).
    """
    schema = load_schema(name)
    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is not None:
        return Violation(
            contract=name,
            path=_json_path(error.absolute_path),
            rule=str(error.validator),
            message=error.message[:300],
            value=_clip(error.instance),
        )
    target = model or CONTRACTS[name]
    try:
        return target.model_validate(data)  # type: ignore[return-value]
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        return Violation(
            contract=name,
            path=_json_path(first["loc"]),
            rule=first["type"],
            message=first["msg"],
            value=_clip(first.get("input")),
        )


def _json_path(parts: Any) -> str:
    path = "$"
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _clip(value: Any) -> Any:
    text = json.dumps(value, default=str)
    return value if len(text) <= 200 else text[:200] + "..."


def _write_all() -> None:
    for name in CONTRACTS:
        path = schema_path(name)
        path.write_text(json.dumps(generate_schema(name), indent=2) + "\n", encoding="utf-8")
        print(f"wrote {path}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m soda.contracts --write   (regenerates schemas/*.json)")
    _write_all()
