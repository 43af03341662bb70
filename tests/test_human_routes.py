"""What ORIENT sees and what the idle daemon answers come from the routing table
(`soda.human.routing.ROUTES`), not from lists of their own: a pending `plan_edit`
(saved after its approval wait ended) is neither shown to ORIENT nor consumed as
"read by ORIENT", and every control kind has an idle answer. A real project, its
inbox and SQLite; the model is the behavioural fake."""

from __future__ import annotations

from pathlib import Path

from soda.contracts import HumanInput, IterationPlan
from soda.human import IDLE_RESPONSES, ControlAction, HumanQueue
from soda.human.routing import Route, kinds_routed
from soda.human.write import write_input
from soda.loop.phases import orient_phase, sense_phase
from soda.store import human_inputs
from tests.plan_fakes import fake_model, new_project, open_session, plan, task

PLAN = plan(task("a", title="Add divide"))


def statuses(human: HumanQueue) -> dict[str, tuple[str, str | None]]:
    """kind -> (status, response) of every input the queue holds."""
    rows = human.db.execute("SELECT kind, status, response FROM human_inputs ORDER BY id")
    return {kind: (status, response) for kind, status, response in rows}


def test_orient_sees_only_its_routes_and_a_plan_edit_stays_pending(tmp_path: Path) -> None:
    session = open_session(new_project(tmp_path), fake_model(PLAN))
    state = session.config.state_dir
    edited = IterationPlan.model_validate(plan(task("a", title="Edited a")))
    write_input(state, HumanInput(kind="plan_edit", target=1, plan=edited))
    write_input(state, HumanInput(kind="correction", text="use argparse"))
    write_input(state, HumanInput(kind="pause"))
    assert len(session.human.ingest(settle_seconds=0).accepted) == 3
    for_orient = [item.id for item in session.human.for_orient()]  # SENSE claims these

    it = session.begin_iteration()
    claims = sense_phase(session, it, lambda line: None)

    assert [(h.kind, h.text) for h in claims.human.pending] == [
        ("correction", "correction: use argparse")
    ], "SENSE showed ORIENT an input the routing table keeps from it"
    assert [h.id for h in claims.human.pending] == for_orient
    assert claims.human.paused is True and session.human.paused() is True

    orient_phase(session, it, claims)

    after = statuses(session.human)
    assert after["plan_edit"] == ("pending", None), (
        f"the plan_edit was consumed by ORIENT: {after['plan_edit']}"
    )
    assert after["pause"] == ("pending", None)  # the daemon's, not ORIENT's
    status, response = after["correction"]
    assert status == "applied" and response is not None and "read by ORIENT" in response


def test_every_control_kind_has_an_idle_answer(tmp_path: Path) -> None:
    """The daemon takes each control kind while idle without a KeyError: a kind
    routed CONTROL but missing from IDLE_RESPONSES would fail at import."""
    session = open_session(new_project(tmp_path), fake_model(PLAN))
    control = sorted(kinds_routed([Route.CONTROL]))
    assert set(IDLE_RESPONSES) == set(control)
    for kind in control:
        write_input(session.config.state_dir, HumanInput(kind=kind))  # type: ignore[arg-type]
    session.human.ingest(settle_seconds=0)

    taken = session.human.take_control_while_idle(next_iteration=4)

    assert sorted(taken, key=lambda a: a.kind) == [
        ControlAction(kind, IDLE_RESPONSES[kind]) for kind in control
    ]
    assert human_inputs.pending_count(session.db) == 0
