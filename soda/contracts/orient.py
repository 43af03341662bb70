"""ORIENT's agents' answers and the iteration plan.

The verifier (`Verification`), assessor (`Assessment`) and planner (`Planning`)
each answer with one of these; `Orientation` is their combination that DECIDE and
ACT consume. `IterationPlan` and `PlanTask` (contract `plan`) are the plan the
planner proposes and the executor carries out.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from soda.config import Risk
from soda.contracts.base import Confidence, Contract, asked_in_full

# --- plan -------------------------------------------------------------------


class PlanTask(Contract):
    model_config = ConfigDict(json_schema_extra=asked_in_full)

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
    """Tools likely to help, with their arguments, e.g.
    "run_tests selector tests/test_x.py::test_y" (the executor's run_tests runs the
    project's own test command: never write a test command by hand)."""
    target_tests: list[str] = Field(default=[])  # a copy each: pydantic copies defaults
    """The tests that show this task done, which the merge requires to pass: pytest
    node ids ("tests/test_x.py::test_y"), test files, or the tests the task itself
    adds. Name only tests this task alone makes pass; a target that fails, or is
    not found, after the change refuses its merge. Empty only with
    `no_target_tests_reason`."""
    no_target_tests_reason: str = ""
    """When `target_tests` is empty: why no test can show this task done (docs,
    a refactoring the existing tests cover); "" when it names tests."""


class IterationPlan(Contract):
    intent: str
    """One sentence: what this iteration will achieve."""
    approach: str
    """How, in a few sentences; test first."""
    tasks: list[PlanTask]
    """The work, as a small DAG through depends_on."""


# --- agent answers ----------------------------------------------------------


class TaskUpdate(Contract):
    task_id: int
    """Trace task to update."""
    action: Literal["close", "block", "unblock", "comment"]
    """close: verified done in code; block: cannot proceed; unblock: blocker no longer
    holds; comment: note only."""
    reason: str
    """Evidence from the code (file, test, command output), not from the claims."""


class NewTask(Contract):
    """A Trace task for later (a child of the milestone's root task)."""

    title: str
    """Short imperative title."""
    description: str
    """What to do and the acceptance check."""
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


class LearningVerdict(Contract):
    learning_id: int
    """The learning's number, as shown (12 for "L12: ...")."""
    keep: bool
    """true: still holds and still useful; false: retire it (never shown again)."""
    reason: str
    """Why, from the code: what shows it is wrong, stale or useless, or still holds."""


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
    learning_verdicts: list[LearningVerdict]
    """Verdicts on the active learnings shown in the claims (`L12: ...`): one for each
    learning you retire (keep false) or checked and keep; a learning without a
    verdict is kept. Empty when you judged none."""


class Assessment(Contract):
    """Assessor output: is the spec met, and what is missing."""

    spec_satisfied: bool | Literal["unverifiable"]
    """true only when every acceptance criterion is met and shown by passing tests;
    the string "unverifiable" when the repository cannot show it (a service or a
    person's decision is needed); false otherwise."""
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
    """true only when every acceptance criterion is met and shown by passing tests;
    the string "unverifiable" when the repository cannot show it (a service or a
    person's decision is needed); false otherwise."""
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
    learning_verdicts: list[LearningVerdict]
    """Verdicts on the active learnings shown in the claims (`L12: ...`): one for each
    learning you retire (keep false) or checked and keep; a learning without a
    verdict is kept. Empty when you judged none."""
