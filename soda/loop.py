"""The SODA loop: one iteration is sense -> orient -> decide -> act.

`iterate` reads like the loop itself; persistence, events and failure handling
wrap around it in `run_iteration`, which always finishes the iteration record
(in a `finally`), and `run_loop`, which repeats until DONE, STUCK or HALT.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from soda import inbox
from soda.act import act, confirm_done
from soda.act.workspace import land_on_base
from soda.approval import await_approval, needs_approval
from soda.contracts import Claims, Orientation
from soda.decide import Budget, Control, Decision, Kind, LoopState, decide
from soda.errors import (
    BudgetExhausted,
    ContractViolation,
    Interrupted,
    ModelStopped,
    StructuralError,
    TransientError,
    UserError,
)
from soda.human import apply_direct_inputs
from soda.orient import apply_orientation, orient
from soda.sense import SenseInput, sense
from soda.session import IterationRecord, Session
from soda.store.db import dumps, now


class Ending(enum.Enum):
    """How a run (or a single iteration) ended, with its process exit code."""

    DONE = "done"
    CONTINUE = "continue"
    STUCK = "stuck"
    HALT = "halt"
    TRANSIENT = "transient"
    INTERRUPTED = "interrupted"

    @property
    def exit_code(self) -> int:
        """0 DONE (and CONTINUE after --once), 3 STUCK, 4 HALT, 5 transient."""
        return {Ending.STUCK: 3, Ending.HALT: 4, Ending.TRANSIENT: 5}.get(self, 0)


@dataclass
class IterationResult:
    number: int
    ending: Ending
    reason: str


Printer = Callable[[str], None]


def iterate(session: Session, record: IterationRecord, say: Printer) -> Decision:
    claims = sense_phase(session, record, say)
    orientation = orient_phase(session, claims, record, say)
    decision = decide_phase(session, claims, orientation, record, say)
    if decision.kind is Kind.CONTINUE:
        act_phase(session, orientation, record, say)
    elif decision.kind is Kind.DONE:
        decision = confirm_phase(session, decision, record, say)
    return decision


def confirm_phase(
    session: Session, decision: Decision, record: IterationRecord, say: Printer
) -> Decision:
    """DONE is not taken on the assessor's word: the milestone tip's tests run on
    a clean checkout first; failures turn it back into work for the next iteration."""
    refused = confirm_done(session)
    if refused is None:
        _close_milestone(session, decision.reason, say)
        return decision
    record.save(decision="CONTINUE", decision_reason=refused, outcome="done_refused")
    say(f"decide: CONTINUE - {refused}")
    return Decision(Kind.CONTINUE, refused)


def orient_phase(
    session: Session, claims: Claims, record: IterationRecord, say: Printer
) -> Orientation:
    orientation = orient(session, claims, record.number)
    orientation = apply_orientation(session, orientation, record.id)
    _consume_human_inputs(session, claims, record, orientation.summary)
    record.save(phase="decide", orient_json=orientation, intent=_intent(orientation))
    say(f"orient: {_spec_state(orientation.spec_satisfied)}; {orientation.summary}")
    return orientation


def decide_phase(
    session: Session,
    claims: Claims,
    orientation: Orientation,
    record: IterationRecord,
    say: Printer,
) -> Decision:
    decision = decide(
        orientation,
        _loop_state(session, claims),
        _budget(session),
        _control(session, claims),
    )
    record.save(decision=decision.kind.name, decision_reason=decision.reason)
    if decision.kind is not Kind.CONTINUE:
        record.save(outcome=decision.kind.name.lower())
    say(f"decide: {decision.kind.name} - {decision.reason}")
    return decision


def act_phase(
    session: Session, orientation: Orientation, record: IterationRecord, say: Printer
) -> None:
    plan = orientation.iteration_plan
    assert plan is not None  # decide() only continues with a plan
    if needs_approval(plan, session.config.approval.risk_threshold):
        verdict = await_approval(session, record.number, plan, say)
        if not verdict.approved:
            record.save(
                outcome="rejected", act_json={"outcome": "rejected", "detail": verdict.reason}
            )
            say(f"act: skipped - {verdict.reason}")
            return
    record.save(phase="act")
    result = act(session, plan, record.number, record.id, say)
    record.save(
        act_json=result.to_json(), outcome=result.outcome, merged_commit=result.merged_commit
    )
    say(f"act: {result.outcome} - {result.detail}")


def _close_milestone(session: Session, summary: str, say: Printer) -> None:
    root = session.tracker.show(session.milestone.root_task_id)
    if root.status != "closed":
        session.tracker.close(root.id, f"spec met: {summary}")
    if session.config.act.on_done == "merge":
        landed = land_on_base(
            session.repo, session.milestone.branch, session.config.project.base_branch
        )
        session.events.emit("done.merge", {"result": landed})
        say(f"done: {landed}")


def sense_phase(session: Session, record: IterationRecord, say: Printer) -> Claims:
    inbox.ingest(session.config.state_dir, session.db, session.events)
    for line in apply_direct_inputs(session, record.number):
        say(f"human: {line}")
    claims = sense(
        SenseInput(
            repo_path=session.config.root,
            milestone_branch=session.milestone.branch,
            base_commit=session.milestone.base_commit,
            milestone=session.milestone.name,
            run_id=session.run_id,
            iteration=record.number,
            iteration_in_run=session.iterations_in_run,
            config=session.config,
            db=session.db,
        )
    )
    ids = [item.id for item in claims.human.pending]
    if ids:
        inbox.claim(session.db, ids, record.number)
    record.save(phase="orient", claims_json=claims)
    say(
        f"sense: {len(claims.code.commits)} commits since base, "
        f"{len(claims.work.open)} open tasks, "
        f"{len(claims.human.pending)} human inputs"
    )
    return claims


def _consume_human_inputs(
    session: Session, claims: Claims, record: IterationRecord, summary: str
) -> None:
    ids = [item.id for item in claims.human.pending]
    if ids:
        inbox.mark_applied(
            session.db,
            ids,
            record.number,
            f"read by ORIENT in iteration {record.number}: {summary}",
        )


def _intent(orientation: Orientation) -> str | None:
    plan = orientation.iteration_plan
    return plan.intent if plan is not None else None


def _spec_state(value: bool | str) -> str:
    return {True: "spec satisfied", False: "spec not yet satisfied"}.get(value, "spec unverifiable")  # type: ignore[call-overload]


def _loop_state(session: Session, claims: Claims) -> LoopState:
    return LoopState(
        session.iterations_in_run,
        session.extra.get("max_iterations", session.config.loop.max_iterations),
        claims.project.loop,
    )


def _budget(session: Session) -> Budget:
    budget = session.config.budget
    return Budget(
        cost_usd=session.recorder.run_cost(),
        max_cost_usd=budget.max_cost_usd,
        tokens_this_iteration=session.recorder.tokens_in + session.recorder.tokens_out,
        max_tokens_per_iteration=budget.max_tokens_per_iteration,
    )


def _control(session: Session, claims: Claims) -> Control:
    return Control(paused=claims.human.paused, stop_requested=session.stop_requested)


def run_iteration(session: Session, say: Printer) -> IterationResult:
    """One iteration with its record, whatever happens inside it."""
    record = session.begin_iteration()
    say(f"iteration {record.number}")
    try:
        decision = iterate(session, record, say)
        ending = {Kind.DONE: Ending.DONE, Kind.STUCK: Ending.STUCK, Kind.CONTINUE: Ending.CONTINUE}[
            decision.kind
        ]
        return IterationResult(record.number, ending, decision.reason)
    except BudgetExhausted as exc:
        record.save(decision="STUCK", decision_reason=str(exc), outcome="budget")
        say(f"decide: STUCK - {exc}")
        return IterationResult(record.number, Ending.STUCK, str(exc))
    except TransientError as exc:
        record.save(outcome="transient", error=str(exc))
        say(f"transient failure: {exc}")
        return IterationResult(record.number, Ending.TRANSIENT, str(exc))
    except StructuralError as exc:
        _record_halt(session, record, exc)
        say(f"HALT: {exc}")
        return IterationResult(record.number, Ending.HALT, str(exc))
    except UserError as exc:
        # A person must fix something (e.g. the API key): record it, end the run, tell them.
        record.save(outcome="error", error=str(exc))
        session.finish_run("error", str(exc))
        raise
    except Interrupted as exc:
        record.save(outcome="interrupted", error=str(exc))
        say(f"interrupted: {exc}")
        return IterationResult(record.number, Ending.INTERRUPTED, str(exc))
    except KeyboardInterrupt:
        record.save(outcome="interrupted", error="interrupted by a signal")
        session.finish_run("interrupted", "interrupted by a signal")
        raise
    finally:
        inbox.release_claims(session.db)
        record.finish(session.recorder)


def _record_halt(session: Session, record: IterationRecord, exc: StructuralError) -> None:
    violation = exc.violation if isinstance(exc, ContractViolation) else None
    agent = exc.agent if isinstance(exc, ContractViolation) else None
    raw = exc.raw if isinstance(exc, ContractViolation | ModelStopped) else None
    with session.db.conn:
        session.db["halts"].insert(
            {
                "run_id": session.run_id,
                "iteration_id": record.id,
                "agent": agent,
                "error_type": type(exc).__name__,
                "message": str(exc),
                "violation_path": violation.path if violation else None,
                "violation_rule": violation.rule if violation else None,
                "raw_output": dumps(raw) if raw is not None else None,
                "created_at": now(),
            }
        )
    record.save(
        decision="HALT", decision_reason=str(exc), outcome="halted", error=type(exc).__name__
    )
    session.events.emit("halt", {"error": type(exc).__name__, "message": str(exc)})


def run_loop(
    session: Session,
    say: Printer,
    once: bool = False,
    should_stop: Callable[[], bool] = lambda: False,
) -> IterationResult:
    """Iterate until DONE, STUCK, HALT or a transient failure (or one CONTINUE with
    `once`); record how the run ended."""
    while True:
        result = run_iteration(session, say)
        if result.ending is not Ending.CONTINUE or once:
            break
        if should_stop():
            result = IterationResult(result.number, Ending.INTERRUPTED, "stopped by a signal")
            break
    status = "stopped" if result.ending is Ending.CONTINUE else result.ending.value
    session.finish_run(status, result.reason)
    return result
