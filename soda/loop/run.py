"""The SODA loop: one iteration is sense -> orient -> decide -> act.

`iterate` reads like the loop itself and is the one place the iteration's
record is written; the phases (soda.loop.phases, soda.loop.act) take explicit inputs and
return values. `run_iteration` wraps it with the record's lifetime and the
classification of every failure; `run_loop` repeats until DONE, STUCK or HALT.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from soda.agent.budget import check_before_iteration
from soda.contracts.outcomes import Ending, IterationDecision, IterationOutcome, RunStatus
from soda.errors import (
    BudgetExhausted,
    ContractViolation,
    Interrupted,
    ModelStopped,
    StructuralError,
    TransientError,
    UserError,
)
from soda.loop import iteration_report, progress
from soda.loop.act import act
from soda.loop.asking import approval_orientation, resume_orientation
from soda.loop.context import Iteration, IterationRecord
from soda.loop.decide import Decision, Kind
from soda.loop.phases import decide_phase, orient_phase, sense_phase, spec_state
from soda.loop.policy import Host, Next, after
from soda.loop.pr import after_iteration
from soda.loop.session import Session
from soda.loop.wake import fingerprint
from soda.store import approvals, runs
from soda.store.db import dumps

__all__ = ["Ending", "IterationResult", "run_iteration", "run_loop"]


@dataclass
class IterationResult:
    number: int
    ending: Ending
    reason: str


Printer = Callable[[str], None]


def iterate(session: Session, it: Iteration, say: Printer) -> Decision:
    record = it.record
    claims = sense_phase(session, it, say)
    record.save(phase="orient", claims_json=claims)
    # A plan that waits for approval, and tasks that waited for a person's
    # answer, go on without replanning.
    waiting = approvals.waiting(session.db)
    orientation = (
        (approval_orientation(waiting) if waiting else None)
        or resume_orientation(session, it)
        or orient_phase(session, it, claims)
    )
    plan = orientation.iteration_plan
    record.save(phase="decide", orient_json=orientation, intent=plan.intent if plan else None)
    say(f"orient: {spec_state(orientation)}; {orientation.summary}")
    decision = decide_phase(session, it, claims, orientation, say)
    outcome = decision.settled_outcome()
    record.save(decision=decision.kind.name, decision_reason=decision.reason, outcome=outcome)
    act_json, merged_commit = None, None
    if outcome is None and plan is not None:
        record.save(phase="act")
        with iteration_report.plan_frame(it.events, it.number, plan):
            result = act(session, it, plan, say, waiting)
        act_json, outcome, merged_commit = result.to_json(), result.outcome, result.merged_commit
        record.save(act_json=act_json, outcome=outcome, merged_commit=result.merged_commit)
        say(f"act: {result.outcome} - {result.detail}")
        if outcome == IterationOutcome.AWAITING_APPROVAL:  # suspended: a person must answer
            decision = Decision(Kind.STUCK, result.detail, outcome)
            record.save(decision=decision.kind.name, decision_reason=decision.reason)
        elif waiting is not None:
            it.progress.append("a person's verdict")
    settled = progress.settle(session, it, claims, decision, outcome, act_json)
    if settled is not decision:  # a limit that holds at every iteration's end
        decision = settled
        record.save(decision=decision.kind.name, decision_reason=decision.reason)
        say(f"decide: {decision.kind.name} - {decision.reason}")
    report = iteration_report.conclude(
        session.db, it.events, it.number, orientation, act_json, outcome, it.cancel_requested
    )
    record.save(report_json=report)
    say(f"report: {iteration_report.line(report)}")
    state = {Kind.DONE: "done", Kind.STUCK: "stuck: a person must act"}.get(
        decision.kind, "working"
    )
    state += f" (iteration {it.number})"
    after_iteration(session, it, iteration_report.line(report), merged_commit, state)
    return decision


def run_iteration(session: Session, say: Printer) -> IterationResult:
    """One iteration with its record, whatever happens inside it. A stop asked for
    by a signal ends it as `interrupted` (unless it merged or found DONE first);
    an error nobody classified is recorded as `crashed` with its text and raised."""
    it = session.begin_iteration()
    record = it.record
    say(f"iteration {it.number}")
    try:
        check_before_iteration(session.config, session.db)  # no paid call to learn it
        decision = iterate(session, it, say)
        ending = {Kind.DONE: Ending.DONE, Kind.STUCK: Ending.STUCK, Kind.CONTINUE: Ending.CONTINUE}[
            decision.kind
        ]
        if session.stop_requested and ending is not Ending.DONE:
            return _interrupted(session, record, "stopped by a signal", say)
        return IterationResult(record.number, ending, decision.reason)
    except BudgetExhausted as exc:
        record.save(
            decision=IterationDecision.STUCK,
            decision_reason=str(exc),
            outcome=IterationOutcome.BUDGET,
        )
        say(f"decide: STUCK - {exc}")
        return IterationResult(record.number, Ending.STUCK, str(exc))
    except TransientError as exc:
        record.save(outcome=IterationOutcome.TRANSIENT, error=str(exc))
        say(f"transient failure: {exc}")
        return IterationResult(record.number, Ending.TRANSIENT, str(exc))
    except StructuralError as exc:
        _record_halt(session, it, exc)
        say(f"HALT: {exc}")
        return IterationResult(record.number, Ending.HALT, str(exc))
    except UserError as exc:
        # A person must fix something (e.g. the API key): record it, end the run, tell them.
        # A merge that landed first stays recorded as merged (e.g. the forge's token
        # was refused after it).
        if runs.iteration_outcome(session.db, record.id) == IterationOutcome.MERGED:
            record.save(error=str(exc))
        else:
            record.save(outcome=IterationOutcome.ERROR, error=str(exc))
        session.finish_run(RunStatus.ERROR, str(exc))
        raise
    except Interrupted as exc:
        return _interrupted(session, record, str(exc), say)
    except KeyboardInterrupt:
        record.save(
            outcome=IterationOutcome.INTERRUPTED, error="stopped at once by a second signal"
        )
        session.finish_run(RunStatus.INTERRUPTED, "stopped at once by a second signal")
        raise
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        record.save(outcome=IterationOutcome.CRASHED, error=error)
        session.finish_run(RunStatus.CRASHED, error)
        it.events.emit("crash", {"error": error})
        raise
    finally:
        it.human.release_claims()
        record.finish(it.recorder)
        _keep_fingerprint(session, it)


def _interrupted(
    session: Session, record: IterationRecord, reason: str, say: Printer
) -> IterationResult:
    """A signal stopped the iteration: recorded as interrupted, unless what it did
    already landed (a merge stays merged). A run out of time ends STUCK instead."""
    if session.wall.passed.is_set() and not session.stopping.is_set():
        return _out_of_time(session, record, say)
    if runs.iteration_outcome(session.db, record.id) != IterationOutcome.MERGED:
        record.save(outcome=IterationOutcome.INTERRUPTED, error=reason)
    say(f"interrupted: {reason}")
    return IterationResult(record.number, Ending.INTERRUPTED, reason)


def _out_of_time(session: Session, record: IterationRecord, say: Printer) -> IterationResult:
    """[budget] max_wall_seconds passed (soda.loop.wall): the iteration, stopped at its
    safe point, ends STUCK naming the key; a merge it landed stays merged."""
    reason = session.wall.reason()
    fields: dict[str, object] = {"decision": IterationDecision.STUCK, "decision_reason": reason}
    if runs.iteration_outcome(session.db, record.id) != IterationOutcome.MERGED:
        fields["outcome"] = IterationOutcome.BUDGET
    record.save(**fields)
    session.events.emit("run.out_of_time", {"seconds": session.wall.seconds})
    say(f"decide: STUCK - {reason}")
    return IterationResult(record.number, Ending.STUCK, reason)


def _keep_fingerprint(session: Session, it: Iteration) -> None:
    """What ORIENT would see next, stored as the iteration ends (see soda.loop.wake)."""
    try:
        it.record.save(fingerprint=fingerprint(session))
    except Exception as exc:  # never worth failing an iteration: the next wake just pays
        it.events.emit("wake.fingerprint_failed", {"error": f"{type(exc).__name__}: {exc}"})


def _record_halt(session: Session, it: Iteration, exc: StructuralError) -> None:
    record = it.record
    violation = exc.violation if isinstance(exc, ContractViolation) else None
    agent = exc.agent if isinstance(exc, ContractViolation) else None
    raw = exc.raw if isinstance(exc, ContractViolation | ModelStopped) else None
    runs.record_halt(
        session.db,
        {
            "run_id": session.run_id,
            "iteration_id": record.id,
            "agent": agent,
            "error_type": type(exc).__name__,
            "message": str(exc),
            "violation_path": violation.path if violation else None,
            "violation_rule": violation.rule if violation else None,
            "raw_output": dumps(raw) if raw is not None else None,
        },
    )
    record.save(
        decision=IterationDecision.HALT,
        decision_reason=str(exc),
        outcome=IterationOutcome.HALTED,
        error=type(exc).__name__,
    )
    it.events.emit("halt", {"error": type(exc).__name__, "message": str(exc)})


def run_loop(
    session: Session,
    say: Printer,
    once: bool = False,
    should_stop: Callable[[], bool] = lambda: False,
) -> IterationResult:
    """Iterate until DONE, STUCK, HALT or a transient failure (or one CONTINUE with
    `once`), as the foreground host's policy says (soda.loop.policy); record how
    the run ended."""
    while True:
        result = run_iteration(session, say)
        if after(Host.FOREGROUND, result.ending, once=once).next is not Next.AGAIN:
            break
        if should_stop():
            result = _stopped_between(session, result.number)
            break
    session.finish_run(result.ending.run_status, result.reason)
    return result


def _stopped_between(session: Session, number: int) -> IterationResult:
    """A stop seen between two iterations: interrupted, or STUCK when out of time."""
    if session.wall.passed.is_set() and not session.stopping.is_set():
        return IterationResult(number, Ending.STUCK, session.wall.reason())
    return IterationResult(number, Ending.INTERRUPTED, "stopped by a signal")
