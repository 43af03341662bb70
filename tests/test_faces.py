"""Every face speaks the routing table's vocabulary: the kinds each face offers
and each host reads derive from `soda.human.routing`, every input a person can
give is built by `soda.human.commands`, no module outside `soda/human/` and
`soda/contracts/` spells a human-input kind, and the verdict rule is one rule
whichever record (a repository's database, a fleet run's memo) it reads."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any, get_args

import pytest

import soda
from soda.contracts import HumanKind, IterationPlan
from soda.errors import InputError
from soda.fleet import state as fleet_state
from soda.fleet.client import MemoRecord
from soda.human import commands, routing
from soda.human.commands import Face, Provenance, Said, Started, Waiting
from soda.human.routing import Control, Route
from soda.web.templating import CONTROL_LABELS

KINDS = frozenset(get_args(HumanKind))


def task(key: str) -> dict[str, Any]:
    fields = {"title": key, "description": key, "depends_on": [], "risk": "low"}
    return {"id": key, "task_id": None, "tool_hints": [], **fields}


def plan(*keys: str) -> dict[str, Any]:
    return {"intent": "add a flag", "approach": "test first", "tasks": [task(k) for k in keys]}


PLAN = plan("a")
ALLOWED_SPELLINGS = {
    "forge/pulls.py": "a writer's review comment recorded as a correction (forge sits below human)",
    "cli/entry.py": "command names (`soda tell`) mapped to their modules; no input built",
}
"""Modules that still spell a kind, and why (the scan fails on any other)."""


class Record:
    """A run's record as plain facts (`commands.RunRecord`): iterations 1-2 ended,
    3 runs and has asked, 4 is the next; the plan of `waiting` waits."""

    run = " of r"

    def __init__(self, waiting: int | None = None, kind: str = "plan") -> None:
        plan = IterationPlan.model_validate(PLAN)
        self._waiting = Waiting(waiting, kind, kind, plan) if waiting is not None else None

    def look(self, number: int | None = None) -> str:
        return "`look`"

    def waiting(self) -> Waiting | None:
        return self._waiting

    def latest(self) -> int:
        return 3

    def takes_next(self) -> bool:
        return True

    def started(self, number: int) -> Started | None:
        return Started(None, asked=True) if number == 3 else Started("merged")

    def running_plan(self, number: int) -> IterationPlan | None:
        return IterationPlan.model_validate(PLAN) if number == 3 else None

    def edit_problems(self, plan: IterationPlan) -> list[str]:
        return [] if len(plan.tasks) < 3 else ["more than 2 tasks"]

    def question(self, question_id: int) -> str | None:
        if question_id != 1:
            raise InputError(f"no question {question_id}")
        return "which flag?"


def every_input(record: Record, by: Provenance) -> list[Said]:
    """One input of every kind a person can give, through the builders."""
    edited = plan("a", "b")
    return [
        commands.tell(by, "use argparse"),
        commands.tell(by, "new spec", "spec_change", mode="replace"),
        *(commands.tell(by, "", "override", action=a, task_id=2) for a in routing_actions()),
        commands.tell(by, "never touch the schema", "override", action="constraint"),
        commands.approve(record, by, 3),
        commands.reject(record, by, 3, "too broad"),
        commands.edit(record, by, 3, json.dumps(edited)),
        commands.answer(record, by, 1, "the --verbose one"),
        *(commands.control(by, kind) for kind in sorted(by.face.controls)),
    ]


def routing_actions() -> list[str]:
    return sorted(
        action for kind, action in routing.ROUTES if kind == "override" and action != "constraint"
    )


def test_every_kind_the_contract_admits_is_built_by_commands() -> None:
    said = every_input(Record(), Provenance(Face.CLI))
    assert {routing.key(s.item) for s in said} == set(routing.ROUTES)
    assert all(s.by.face is Face.CLI for s in said)


def test_each_face_offers_only_routed_kinds_and_the_hosts_read_the_table() -> None:
    control = routing.kinds_routed([Route.CONTROL])
    for face in Face:
        assert face.controls <= control, face
        kinds = {s.item.kind for s in every_input(Record(), Provenance(face))}
        assert kinds <= KINDS and kinds - face.controls == KINDS - control, face
    assert Face.CLI.controls == control
    assert Face.WEB.controls == Face.FLEET.controls == routing.HOST_CONTROLS
    assert set(CONTROL_LABELS) == Face.WEB.controls  # the web's buttons
    assert fleet_state.VERDICT_KINDS is routing.VERDICT_KINDS  # the fleet's workflow reads it
    assert routing.VERDICT_KINDS == routing.kinds_routed([Route.VERDICT, Route.EDIT])
    assert routing.HOST_CONTROLS | {Control.CANCEL} == control
    assert routing.GUIDANCE_KINDS == routing.kinds_routed([Route.ORIENT])
    for face in Face:  # a face records its provenance in the inbox files it writes
        assert face.source is None or face.source in commands.SOURCES


def test_a_face_cannot_send_what_it_does_not_offer() -> None:
    with pytest.raises(InputError, match="unknown control 'cancel': use one of pause, resume"):
        commands.control(Provenance(Face.WEB), Control.CANCEL)
    with pytest.raises(InputError, match="cannot tell soda a 'approve'"):
        commands.tell(Provenance(Face.CLI), "yes", "approve")
    with pytest.raises(InputError, match="the correction is empty"):
        commands.tell(Provenance(Face.WEB), "  ")
    with pytest.raises(InputError, match="the answer to question 1 is empty"):
        commands.answer(Record(), Provenance(Face.FLEET), 1, " ")


def test_provenance_names_the_person_when_the_face_knows_one() -> None:
    said = commands.tell(Provenance(Face.WEB, who="ada"), "use argparse")
    assert said.line() == "correction: use argparse (from ada)"
    assert commands.tell(Provenance(Face.CLI), "x").line() == "correction: x"


def test_the_verdict_rule_once() -> None:
    by, record = Provenance(Face.CLI), Record()
    assert commands.approve(record, by, 3).note is None  # running, and it asked
    assert commands.approve(record, by, 4).note == (
        "iteration 4 has not started; the answer waits for it"
    )
    with pytest.raises(InputError, match=r"iteration 2 of r is not waiting .* ended \(merged\)"):
        commands.reject(record, by, 2)
    with pytest.raises(InputError, match=r"no iteration 5 of r to approve: the latest is 3, and"):
        commands.approve(record, by, 5)
    waits = Record(waiting=2)  # an ended iteration whose plan waits (suspended)
    assert commands.approve(waits, by, 2).note is None
    with pytest.raises(InputError, match="iteration 2's plan waits, the latest is 3"):
        commands.approve(waits, by, 0)


def test_the_approve_edit_flow_once() -> None:
    by = Provenance(Face.WEB)
    unchanged = commands.edit(Record(), by, 3, json.dumps(PLAN))
    assert (unchanged.item.kind, unchanged.note) == ("approve", commands.UNCHANGED)
    three = plan("a", "b", "c")
    with pytest.raises(InputError, match="more than 2 tasks; the original plan still waits"):
        commands.edit(Record(), by, 3, json.dumps(three))
    with pytest.raises(InputError, match="invalid JSON at line 1"):
        commands.edit(Record(), by, 3, "{")
    with pytest.raises(InputError, match="a merge has nothing to edit"):
        commands.edit(Record(waiting=3, kind="merge"), by, 3, json.dumps(PLAN))
    with pytest.raises(InputError, match="iteration 4 of r has no plan to edit"):
        commands.edit(Record(), by, 4, json.dumps(PLAN))


def memo(status: str, iteration: int, approval: dict[str, Any] | None = None) -> MemoRecord:
    history = [{"number": n, "ending": "continue", "outcome": "merged"} for n in range(1, 3)]
    described = {"run": "r", "status": {"status": status, "iteration": iteration}}
    return MemoRecord({**described, "history": history, "approval": approval})


def test_a_fleet_run_takes_a_verdict_for_its_running_iteration_only() -> None:
    by = Provenance(Face.FLEET)
    running = memo("running", 2)
    assert commands.approve(running, by, 3).note == "iteration 3 is running and has not asked yet"
    with pytest.raises(InputError, match=r"only the running one \(3\) can be answered"):
        commands.approve(running, by, 4)
    with pytest.raises(InputError, match=r"iteration 2 of r is not waiting .* \(merged\)"):
        commands.approve(running, by, 2)
    placing = memo("placing", 2)
    assert commands.approve(placing, by, 3).note == (
        "iteration 3 has not started; the answer waits for it"
    )
    approval = {"iteration": 2, "plan": PLAN, "kind": "plan", "what": "plan", "known_tasks": []}
    waiting = memo("waiting", 2, {**approval, "max_tasks": 1})
    assert commands.edit(waiting, by, 2, json.dumps(PLAN)).item.kind == "approve"
    two = plan("a", "b")
    with pytest.raises(InputError, match="edited plan refused: .*max_tasks"):
        commands.edit(waiting, by, 2, json.dumps(two))
    # Refused before the parser recurses: deep enough to break json.loads.
    with pytest.raises(InputError, match="invalid JSON: nested deeper than 64 levels"):
        commands.edit(waiting, by, 2, "[" * 100_000)


def spelled_kinds(path: Path) -> list[tuple[int, str]]:
    """Kinds written as string constants where code compares, collects or
    builds inputs: in a comparison, a collection, or a `kind=` argument."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            found += [node.left, *node.comparators]
        elif isinstance(node, ast.Set | ast.List | ast.Tuple):
            found += node.elts
        elif isinstance(node, ast.keyword) and node.arg == "kind":
            found.append(node.value)
    return [
        (node.lineno, node.value)
        for node in found
        if isinstance(node, ast.Constant) and node.value in KINDS
    ]


def test_no_module_outside_human_and_contracts_spells_an_input_kind() -> None:
    root = Path(soda.__file__).parent
    spelled = {}
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root).as_posix()
        if name.startswith(("human/", "contracts/")) or name in ALLOWED_SPELLINGS:
            continue
        if found := spelled_kinds(path):
            spelled[name] = found
    assert spelled == {}, "derive these from soda.human.routing or build with soda.human.commands"
    for name in ALLOWED_SPELLINGS:  # an exception that is no longer needed goes
        assert spelled_kinds(root / name), f"{name} spells no kind now: drop its exception"
