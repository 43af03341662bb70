"""Every input a person can give, checked and built once, whichever face it
comes through: the CLI, the web dashboard, `soda fleet`, a tracker's comment,
`soda mcp serve` (and the faces to come).

A face parses what the person did, calls one builder here with its
`Provenance`, and delivers the `Said` it gets back (the inbox for a repository
on this machine: `queue`; a Temporal signal for a fleet run). A builder refuses
with an `InputError` (one line saying what is wrong; nothing is delivered):

    tell      correction, spec_change, override   (`routing.TOLD_KINDS`)
    answer    answer to an agent's open question
    approve   approve / reject the plan or merge an iteration waits with
    reject    (`verdict_note`: the one rule for which iteration may take one)
    edit      approve a waiting plan as the person edited it (`edit`: an
              unchanged plan is a plain approve)
    control   pause, resume, stop, cancel: what each face offers (`Face.controls`)
    slash     a comment on the forge's issue tracker: `/soda stop|pause|resume|
              approve`, or else the answer to the question the issue's run
              waits for, or else a correction (`Face.TRACKER`)

What a face knows of the run it speaks to is a `RunRecord`: a repository's
database (`soda.human.checks.DatabaseRecord`) or a fleet run's memo on the
Temporal server (`soda.fleet.client`). The rule and its words live here; the
record only reports facts.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from soda.contracts import HumanInput, IterationPlan, validate
from soda.errors import InputError, Violation
from soda.human import routing
from soda.human.parse import too_deep
from soda.human.write import SOURCES, describe, write_input

KEEP = "the original plan still waits"
UNCHANGED = "the plan is unchanged: approved as it is"


class Face(enum.StrEnum):
    """Where a person's input came in."""

    CLI = "cli"
    WEB = "web"
    FLEET = "fleet"
    TRACKER = "tracker"
    MCP = "mcp"

    @property
    def source(self) -> str | None:
        """The provenance its inbox files record (`soda.human.write.SOURCES`);
        None: the inbox's own (a CLI command is a person's file)."""
        return None if self is Face.CLI else self.value

    @property
    def controls(self) -> frozenset[str]:
        """The CONTROL kinds this face offers: the fleet and the web, those a host
        applies between iterations; the CLI also `cancel` (ACT takes it)."""
        return routing.CONTROL_KINDS if self is Face.CLI else routing.HOST_CONTROLS


@dataclass(frozen=True)
class Provenance:
    """Who said it and through which face."""

    face: Face
    who: str | None = None
    """The person as the face knows them (a tracker's login), or the program they
    speak through (an MCP client's name, recorded in the provenance), when it
    knows one: shown in `Said.line`."""


@dataclass(frozen=True)
class Said:
    """One checked input, ready to deliver."""

    item: HumanInput
    by: Provenance
    note: str | None = None
    """What the person should know besides (e.g. the iteration has not started)."""

    def line(self) -> str:
        """What was said, in one line (`soda.human.write.describe`)."""
        who = f" (from {self.by.who})" if self.by.who else ""
        return f"{describe(self.item)}{who}"


@dataclass(frozen=True)
class Waiting:
    """The plan (or held merge) a run's iteration waits with for a verdict."""

    iteration: int
    kind: str
    """plan, or merge."""
    what: str
    """The `plan`, or the `merge of task T`."""
    plan: IterationPlan


@dataclass(frozen=True)
class Started:
    """An iteration that started: how it ended (None while it runs), and
    whether it asked for a verdict."""

    ended: str | None
    asked: bool = False


class RunRecord(Protocol):
    """What a face knows of the run a person's input goes to."""

    @property
    def run(self) -> str:
        """How messages name the run after "iteration N" ("" for this repository)."""
        ...

    def look(self, number: int | None = None) -> str:
        """Where the person looks at iteration `number` (or at them all), e.g.
        "`soda show 3`"."""
        ...

    def waiting(self) -> Waiting | None:
        """The plan or merge waiting for a verdict, if one does."""
        ...

    def latest(self) -> int:
        """The highest iteration number that started (0: none)."""
        ...

    def takes_next(self) -> bool:
        """Whether a verdict may name the iteration after `latest` (it may yet ask)."""
        ...

    def started(self, number: int) -> Started | None:
        """Iteration `number` (at most `latest`), None if there is none."""
        ...

    def running_plan(self, number: int) -> IterationPlan | None:
        """The plan of iteration `number` that blocks for a verdict while it runs."""
        ...

    def edit_problems(self, plan: IterationPlan) -> list[str]:
        """What is wrong with an edited plan against the run's tasks and limits."""
        ...

    def question(self, question_id: int) -> str | None:
        """The open question `question_id` asks (InputError if it is not open);
        None when the record cannot say (the worker checks it)."""
        ...


def checked_input(fields: dict[str, Any]) -> HumanInput:
    """`fields` (None values dropped) as a `HumanInput`, or an InputError naming
    the field the contract refuses."""
    data = {key: value for key, value in fields.items() if value is not None}
    item = validate("human_input", data, HumanInput)
    if isinstance(item, Violation):
        raise InputError(f"{item.path}: {item.message}")
    return item


def _said(by: Provenance, note: str | None = None, **fields: Any) -> Said:
    return Said(checked_input(fields), by, note)


# --- what a person says -----------------------------------------------------------


def tell(
    by: Provenance,
    text: str,
    kind: str | None = None,
    *,
    mode: str | None = None,
    action: str | None = None,
    task_id: int | None = None,
) -> Said:
    """A correction (the default `kind`), a spec change or an override."""
    kind = kind or "correction"
    if kind not in routing.TOLD_KINDS:
        told = ", ".join(sorted(routing.TOLD_KINDS))
        raise InputError(f"cannot tell soda a {kind!r}: tell one of {told}")
    if kind != "override" and not text.strip():
        raise InputError(f"the {kind} is empty: write what soda should know")
    return _said(by, kind=kind, text=text or None, mode=mode, action=action, task_id=task_id)


def answer(record: RunRecord, by: Provenance, question: int, text: str) -> Said:
    """An answer to open question `question`."""
    if not text.strip():
        raise InputError(f"the answer to question {question} is empty: write one")
    asked = record.question(question)
    note = f"question {question}: {asked}" if asked is not None else None
    return _said(by, note, kind="answer", target=question, text=text)


def approve(record: RunRecord, by: Provenance, number: int) -> Said:
    """Approve the plan or merge iteration `number` waits with (or may yet ask for)."""
    return _said(by, verdict_note(record, number, "approve"), kind="approve", target=number)


def reject(record: RunRecord, by: Provenance, number: int, reason: str | None = None) -> Said:
    """Reject the plan or merge iteration `number` waits with (or may yet ask for)."""
    note = verdict_note(record, number, "reject")
    return _said(by, note, kind="reject", target=number, text=(reason or "").strip() or None)


def plan_to_edit(record: RunRecord, number: int) -> IterationPlan:
    """The plan iteration `number` waits with, once a verdict may name it: what
    a face shows the person to edit."""
    verdict_note(record, number, "approve")
    return waiting_plan(record, number)


def edit(record: RunRecord, by: Provenance, number: int, text: str) -> Said:
    """Approve iteration `number`'s waiting plan as the person edited it (`text`,
    its JSON): checked against the plan contract, then `record.edit_problems`.
    An unchanged plan is a plain approve."""
    note = verdict_note(record, number, "approve")
    original = waiting_plan(record, number)
    edited = checked_edit(record, text)
    if edited == original:
        return _said(by, UNCHANGED, kind="approve", target=number)
    return _said(by, note, kind="plan_edit", target=number, plan=edited.model_dump(mode="json"))


def control(by: Provenance, kind: str) -> Said:
    """A control (pause, resume, stop, cancel) the face offers."""
    offered = by.face.controls
    if kind not in offered:
        raise InputError(f"unknown control {str(kind)!r}: use one of {', '.join(sorted(offered))}")
    return _said(by, kind=kind)


def slash(record: RunRecord, by: Provenance, text: str, asked: int | None = None) -> Said:
    """A writer's comment on a tracker's issue: `/soda stop` (pause, resume), or
    `/soda approve` (the plan or merge the run waits with), or else the answer to
    question `asked` (the open question the issue's run waits for, if one does),
    or else a correction."""
    words = text.strip().split(maxsplit=2)
    if len(words) < 2 or words[0].lower() != "/soda":
        if asked is not None:
            return answer(record, by, asked, text.strip())
        return tell(by, text.strip())
    verb = words[1].lower()
    if verb == "approve":
        waiting = record.waiting()
        if waiting is None:
            raise InputError("/soda approve: no plan or merge waits for a verdict")
        return approve(record, by, waiting.iteration)
    if verb in by.face.controls:
        return control(by, verb)
    offered = ", ".join(sorted({*by.face.controls, "approve"}))
    raise InputError(f"/soda {verb}: unknown (say one of {offered})")


def queue(state_dir: Path, said: Said) -> Path:
    """Deliver `said` to a repository's inbox, its face as its provenance."""
    return write_input(state_dir, said.item, said.by.face.source, said.by.who)


# --- the rules ----------------------------------------------------------------------


def verdict_note(record: RunRecord, number: int, verb: str) -> str | None:
    """Raise InputError unless iteration `number` waits for a verdict, may still
    ask for one (it runs), or is the next one (when the record takes it); a note
    for the person, if any."""
    waiting = record.waiting()
    if waiting is not None and waiting.iteration == number:
        return None  # its plan (or merge) waits
    latest, takes_next = record.latest(), record.takes_next()
    last = latest + 1 if takes_next else latest
    if number < 1 or number > last:
        known = [f"iteration {waiting.iteration}'s {waiting.what} waits"] if waiting else []
        known.append(f"the latest is {latest}" if latest else "there is none yet")
        may = f"the next one ({last})" if takes_next else f"the running one ({last})"
        raise InputError(
            f"no iteration {number}{record.run} to {verb}: {', '.join(known)}, and only"
            f" {may} can be answered before it asks (see {record.look()})"
        )
    if number == latest + 1:
        return f"iteration {number} has not started; the answer waits for it"
    started = record.started(number)
    if started is None:  # numbers continue across runs, but a gap is possible
        raise InputError(f"no iteration {number}{record.run} to {verb} (see {record.look()})")
    if started.ended is not None:
        raise InputError(
            f"iteration {number}{record.run} is not waiting for approval: it ended"
            f" ({started.ended}); see {record.look(number)}"
        )
    return None if started.asked else f"iteration {number} is running and has not asked yet"


def waiting_plan(record: RunRecord, number: int) -> IterationPlan:
    """Iteration `number`'s plan as ORIENT left it, waiting for approval."""
    waiting = record.waiting()
    if waiting is not None and waiting.iteration == number:
        if waiting.kind == "merge":
            raise InputError(
                f"iteration {number}{record.run} waits for approval of its {waiting.what},"
                " not of a plan: approve or reject it (a merge has nothing to edit)"
            )
        return waiting.plan
    plan = record.running_plan(number)
    if plan is None:
        shown = f"iteration {waiting.iteration}'s {waiting.what} waits" if waiting else ""
        raise InputError(
            f"iteration {number}{record.run} has no plan to edit{f' ({shown})' if shown else ''}"
            f" (yet); see {record.look(number)}"
        )
    return plan


def checked_edit(record: RunRecord, text: str) -> IterationPlan:
    """An edited plan's text as a valid plan, or an InputError saying why not
    (not JSON, the plan contract, or `record.edit_problems`)."""
    deep = too_deep(text)
    if deep is not None:
        raise InputError(f"edited plan refused: invalid JSON: {deep}; {KEEP}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"edited plan refused: invalid JSON at line {exc.lineno}, column {exc.colno}: "
            f"{exc.msg}; {KEEP}"
        ) from None
    plan = validate("plan", data, IterationPlan)
    if isinstance(plan, Violation):
        raise InputError(
            f"edited plan refused: plan contract violated at {plan.path}: {plan.message}; {KEEP}"
        )
    problems = record.edit_problems(plan)
    if problems:
        raise InputError(f"edited plan refused: {'; '.join(problems)}; {KEEP}")
    return plan


def _check_faces() -> None:
    unknown = {face.source for face in Face} - {None} - SOURCES
    if unknown:
        raise RuntimeError(f"faces without an inbox provenance in soda.human.write: {unknown}")


_check_faces()
