"""Typed mirrors of the JSON Schema contracts in `schemas/`, and the one validator.

Every document that crosses a boundary (SENSE -> ORIENT, agent -> orchestrator,
person -> inbox) has a contract: a JSON Schema file that a person or a model can
read, and a pydantic model the code uses. The files are generated from the models
(`python -m soda.contracts --write` rewrites them) and a test fails if they drift
apart.

The schemas are written to be accepted as they are by model APIs' structured
output: every object is closed (`additionalProperties: false`), there are no
open dictionaries and no numeric or length constraints. Agent answers make
every field required (nullable where it may be empty), as strict modes demand.

`validate(name, data)` returns the typed object or a `Violation` naming the JSON
path, the failing rule and the offending value; the loop HALTs on the latter.

Layout: `base` (the `Contract` base model, shared types), `claims` (SENSE),
`orient` (verifier, assessor, planner, the combined orientation and the plan),
`execute` (the executor), `retry` (the retrier), `human` (a person's input),
`schema` (the registry of named contracts, schema files and validation).
Everything is re-exported here, except `outcomes`: the string enums of how
attempts, tasks, iterations and runs end and of Trace's task status, with the
tables that translate one into another (no schema; read from its own module).

May import: config, errors.
"""

from __future__ import annotations

from soda.contracts.base import Confidence, Contract
from soda.contracts.claims import (
    BudgetStatus,
    CheckBrief,
    Claims,
    CodeClaims,
    CommentBrief,
    Commit,
    ForgeClaims,
    HumanClaims,
    HumanItem,
    IterationBrief,
    LastAct,
    LoopStatus,
    ProjectClaims,
    TaskAttempt,
    TaskBrief,
    TestFailure,
    TestsBrief,
    WorkClaims,
)
from soda.contracts.execute import BlockedTask, ExecuteResult, NewSubtask, TaskComment
from soda.contracts.human import HumanInput, HumanKind
from soda.contracts.orient import (
    Assessment,
    ClaimCheck,
    Gap,
    IterationPlan,
    NewTask,
    Orientation,
    Planning,
    PlanTask,
    TaskUpdate,
    Verification,
)
from soda.contracts.planning_choice import PlanningChoice
from soda.contracts.retry import RetryAdvice
from soda.contracts.schema import (
    CONTRACTS,
    generate_schema,
    load_schema,
    schema_path,
    validate,
)

__all__ = [
    "CONTRACTS",
    "Assessment",
    "BlockedTask",
    "BudgetStatus",
    "CheckBrief",
    "ClaimCheck",
    "Claims",
    "CodeClaims",
    "CommentBrief",
    "Commit",
    "Confidence",
    "Contract",
    "ExecuteResult",
    "ForgeClaims",
    "Gap",
    "HumanClaims",
    "HumanInput",
    "HumanItem",
    "HumanKind",
    "IterationBrief",
    "IterationPlan",
    "LastAct",
    "LoopStatus",
    "NewSubtask",
    "NewTask",
    "Orientation",
    "PlanTask",
    "Planning",
    "PlanningChoice",
    "ProjectClaims",
    "RetryAdvice",
    "TaskAttempt",
    "TaskBrief",
    "TaskComment",
    "TaskUpdate",
    "TestFailure",
    "TestsBrief",
    "Verification",
    "WorkClaims",
    "generate_schema",
    "load_schema",
    "schema_path",
    "validate",
]
