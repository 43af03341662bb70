"""Plan-only: SENSE, ORIENT and DECIDE without ACT, and the plan shown as a DAG.

`soda plan` (and `soda run --plan-only`) previews what the next iteration would
do. It records an iteration with outcome `plan_only` (claims, orientation,
decision) and changes nothing else: no branch, worktree or commit in the
repository (a milestone branch it had to create to read from is deleted again),
no human input consumed (ORIENT sees the pending ones, they stay pending), no
Trace task created, and DONE is not confirmed (that would run the tests and may
merge). `render_plan` draws a plan as its Kahn batches, also for `soda show`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from soda.config import Config
from soda.contracts import IterationPlan, LoopStatus, Orientation
from soda.contracts.outcomes import IterationOutcome, RunStatus
from soda.contracts.plan_dag import batches
from soda.errors import SodaError
from soda.human.approval import needs_approval, plan_risk
from soda.llm.base import Model
from soda.loop.context import Iteration
from soda.loop.decide import Budget, Control, Decision, Kind, LoopState, decide
from soda.loop.orient import orient
from soda.loop.phases import sense_input
from soda.loop.sense import sense
from soda.loop.session import Session
from soda.repo.git import open_repo
from soda.repo.milestone import milestone_branch

Printer = Callable[[str], None]


@dataclass(frozen=True)
class Preview:
    """What a plan-only iteration found."""

    number: int
    orientation: Orientation
    decision: Decision


def preview(config: Config, say: Printer, model: Model | None = None) -> Preview:
    """Open a session, run one plan-only iteration, end the run; a milestone branch
    the session had to create (to read from) is deleted again."""
    branch = milestone_branch(config)
    created = branch not in {head.name for head in open_repo(config.root).heads}
    session = Session.open(config, model)
    try:
        return plan_only(session, say)
    finally:
        session.finish_run(RunStatus.PLAN_ONLY, "plan only: SENSE, ORIENT and DECIDE")
        if created:
            session.repo.delete_head(branch, force=True)


def plan_only(session: Session, say: Printer) -> Preview:
    """SENSE, ORIENT and DECIDE as a recorded `plan_only` iteration; no ACT."""
    it = session.begin_iteration()
    record = it.record
    say(f"iteration {it.number} (plan only)")
    try:
        claims = sense(sense_input(session, it.number))
        record.save(phase="orient", claims_json=claims)
        orientation = orient(session, it, claims)
        plan = orientation.iteration_plan
        record.save(phase="decide", orient_json=orientation, intent=plan.intent if plan else None)
        decision = _decide(session, it, claims.project.loop, claims.human.paused, orientation)
        record.save(
            decision=decision.kind.name,
            decision_reason=decision.reason,
            outcome=IterationOutcome.PLAN_ONLY,
        )
        it.events.emit(
            "plan.previewed",
            {
                "plan": it.number,
                "tasks": len(plan.tasks) if plan else 0,
                "decision": decision.kind.name,
            },
        )
        return Preview(it.number, orientation, decision)
    except SodaError as exc:
        record.save(outcome=IterationOutcome.PLAN_ONLY, error=f"{type(exc).__name__}: {exc}")
        raise
    finally:
        record.finish(it.recorder)


def _decide(
    session: Session, it: Iteration, loop: LoopStatus, paused: bool, orientation: Orientation
) -> Decision:
    recorder, budget = it.recorder, session.config.budget
    return decide(
        orientation,
        LoopState(session.iterations_in_run, session.iteration_limit, loop),
        Budget(
            cost_usd=recorder.run_cost(),
            max_cost_usd=budget.max_cost_usd,
            tokens_this_iteration=recorder.tokens_in + recorder.tokens_out,
            max_tokens_per_iteration=budget.max_tokens_per_iteration,
        ),
        Control(paused=paused, stop_requested=session.stop_requested),
    )


def render_plan(plan: IterationPlan, indent: str = "  ") -> list[str]:
    """The plan as its batches: one line per task with its risk and dependencies,
    e.g. `batch 2: [b] Tests for divide (risk low) <- a`, and a line under it with
    its target tests (or why it has none)."""
    lines = [f"{indent}approach: {plan.approach}"] if plan.approach else []
    try:
        layers = batches(plan)
    except SodaError:  # a cycle: shown as listed (ORIENT never lets one through)
        layers = [plan.tasks]
    for number, layer in enumerate(layers, start=1):
        for position, task in enumerate(layer):
            head = f"batch {number}:" if position == 0 else " " * len(f"batch {number}:")
            trace = f" #{task.task_id}" if task.task_id is not None else ""
            after = f" <- {', '.join(task.depends_on)}" if task.depends_on else ""
            lines.append(
                f"{indent}{head} [{task.id}]{trace} {task.title} (risk {task.risk}){after}"
            )
            pad = indent + " " * (len(head) + 1)
            if task.target_tests:
                lines.append(f"{pad}targets: {', '.join(task.target_tests)}")
            elif task.no_target_tests_reason:
                lines.append(f"{pad}no target tests: {task.no_target_tests_reason}")
    return lines


def render_preview(preview: Preview, config: Config) -> list[str]:
    """What `soda plan` prints: the plan as a DAG, its risk, and the decision."""
    plan = preview.orientation.iteration_plan
    decision = preview.decision
    lines = [f"orient: {preview.orientation.summary}"]
    if plan is None:
        stuck = preview.orientation.stuck_reason
        lines.append("plan: none" + (f" ({stuck})" if stuck else ""))
    else:
        lines.append(f"plan for iteration {preview.number}: {plan.intent}")
        lines += render_plan(plan)
        threshold = config.approval.risk_threshold
        gate = (
            "needs `soda approve`" if needs_approval(plan, threshold) else "runs without approval"
        )
        lines.append(f"  risk: {plan_risk(plan)} ({gate}; threshold {threshold})")
    reason = decision.reason
    if decision.kind is Kind.DONE:
        reason += " (not confirmed: plan-only runs no tests)"
    lines.append(f"decide: {decision.kind.name} - {reason}")
    lines.append("plan only: nothing was changed in the repository")
    return lines
