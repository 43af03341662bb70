"""The phases before ACT, as functions of explicit inputs returning a value.

    sense_phase    Session, Iteration          -> Claims       (no LLM)
    orient_phase   Session, Iteration, Claims  -> Orientation  (agents)
    decide_phase   Session, Claims, Orientation -> Decision    (pure decide())
    confirm_phase  Session, Decision           -> Decision     (DONE needs passing tests)

Each says one line about what it found; none writes the iteration record (the
loop does, in one place). ACT is `soda.loop.act.act`.
"""

from __future__ import annotations

from collections.abc import Callable

from soda.contracts import Claims, Orientation
from soda.contracts.outcomes import IterationOutcome, TaskStatus
from soda.gate import confirm_done
from soda.loop.context import Iteration
from soda.loop.decide import Budget, Control, Decision, Kind, LoopState, decide
from soda.loop.orient import apply_orientation, orient
from soda.loop.pr import at_done, done_line, sense_forge
from soda.loop.progress import note_spec
from soda.loop.sense import SenseInput, sense
from soda.loop.session import Session
from soda.repo.workspace import land_on_base

Printer = Callable[[str], None]


def sense_input(session: Session, number: int) -> SenseInput:
    """What SENSE reads for iteration `number` of this session."""
    return SenseInput(
        repo_path=session.config.root,
        milestone_branch=session.milestone.branch,
        base_commit=session.milestone.base_commit,
        milestone=session.milestone.name,
        run_id=session.run_id,
        iteration=number,
        iteration_in_run=session.iterations_in_run,
        config=session.config,
        db=session.db,
        repo=session.repo,
    )


def sense_phase(session: Session, it: Iteration, say: Printer) -> Claims:
    """Take in the person's files, apply what needs no judgment, gather the claims,
    and claim the inputs ORIENT will read."""
    it.events.emit("sense.start", {"number": it.number})
    human = it.human
    human.ingest()
    forge = sense_forge(session, it)  # a writer's new comment is a pending input now
    for line in human.apply_at_sense(
        session.tracker, session.config.spec_path, session.store_learnings, it.number
    ):
        it.progress.append("a person's input")
        say(f"human: {line}")
    note_spec(session, it)  # after a spec_change input wrote it: either is the person's
    claims = sense(sense_input(session, it.number))
    if forge is not None:
        claims = claims.model_copy(update={"forge": forge})
    ids = [item.id for item in claims.human.pending]
    if ids:
        human.claim(ids, it.number)
        it.progress.append("a person's input")
    say(
        f"sense: {len(claims.code.commits)} commits since base, "
        f"{len(claims.work.open)} open tasks, {len(ids)} human inputs"
    )
    return claims


def orient_phase(session: Session, it: Iteration, claims: Claims) -> Orientation:
    """The agents' reading, written to Trace and learnings; the human inputs they
    read are marked applied."""
    it.events.emit("orient.start", {"number": it.number})
    try:
        orientation = orient(session, it, claims)
    finally:
        session.checkouts.let_go_view()  # ORIENT's checkout of the tip: free for ACT's tasks
    orientation = apply_orientation(session, it, orientation)
    ids = [item.id for item in claims.human.pending]
    if ids:
        it.human.mark_applied(
            ids, it.number, f"read by ORIENT in iteration {it.number}: {orientation.summary}"
        )
    return orientation


def decide_phase(
    session: Session, it: Iteration, claims: Claims, orientation: Orientation, say: Printer
) -> Decision:
    recorder = it.recorder
    budget = session.config.budget
    decision = decide(
        orientation,
        LoopState(session.iterations_in_run, session.iteration_limit, claims.project.loop),
        Budget(
            cost_usd=recorder.run_cost(),
            max_cost_usd=budget.max_cost_usd,
            tokens_this_iteration=recorder.tokens_in + recorder.tokens_out,
            max_tokens_per_iteration=budget.max_tokens_per_iteration,
        ),
        Control(paused=claims.human.paused, stop_requested=session.stop_requested),
    )
    if decision.kind is Kind.DONE:
        decision = confirm_phase(session, it, decision, say)
    it.events.emit("decide.done", {"decision": decision.kind.name, "reason": decision.reason})
    say(f"decide: {decision.kind.name} - {decision.reason}")
    return decision


def confirm_phase(session: Session, it: Iteration, decision: Decision, say: Printer) -> Decision:
    """DONE is not taken on the assessor's word: the milestone tip's tests run on
    a clean checkout first, and a pull request's failing checks count too (soda.loop.pr);
    failures turn it back into work for the next iteration."""
    refused = confirm_done(
        session.config,
        session.jail,
        session.db,
        session.checkouts,
        session.milestone.branch,
        it.events,
    )
    if refused is None:  # CI on the pull request is the second gate
        refused = at_done(session, it, decision.reason)
    if refused is not None:
        return Decision(Kind.CONTINUE, refused, outcome=IterationOutcome.DONE_REFUSED)
    if (line := done_line(session)) is not None:
        say(f"done: {line}")
    root = session.tracker.show(session.milestone.root_task_id)
    if root.status != TaskStatus.CLOSED:
        session.tracker.close(root.id, f"spec met: {decision.reason}")
    if session.config.act.on_done == "merge":
        landed = land_on_base(
            session.repo, session.milestone.branch, session.config.project.base_branch
        )
        it.events.emit("done.merge", {"result": landed})
        say(f"done: {landed}")
    return decision


def spec_state(orientation: Orientation) -> str:
    value = orientation.spec_satisfied
    if value is True:
        return "spec satisfied"
    return "spec not yet satisfied" if value is False else "spec unverifiable"
