"""ORIENT: agents verify the claims, assess the spec and plan the iteration.

Two patterns (`[loop] orient_pattern`): `split` runs verifier -> assessor ->
planner, each a fresh context with its own contract; `single` runs one agent
that walks the same three steps. Both read the milestone branch through the
pool's clean checkout of its tip (`Checkouts.view`) with read-only tools, and both end in one
`Orientation`. The agents that plan (planner, orienter) are also told the
test command, the changes the gate holds for a person and the approval
threshold (`tests_and_merges`; the verifier is told them too, as it judges
claims of tested and merged work by them), are given the repository map of the tip
(`repo_map`, see `soda.tools.treemap`; made only when such an agent runs), and
may ask the person (`ask_human`, which ends ORIENT); the verifier and the
assessor may not ask. A plan that passes its schema but not the semantic checks
(unknown dependencies, cycles, unknown tasks, more than `[plan] max_tasks`
tasks) goes back to the agent that made it (planner or orienter) with the
problems, at most PLAN_REPAIRS times in all, then HALTs with the last problems.
Applying the result (task updates, new tasks, learnings, plan tasks made into
Trace tasks) is `apply_orientation`. Each agent's inputs are first shrunk to fit
its model's context window (`soda.loop.fit`).
"""

from __future__ import annotations

from collections.abc import Callable, Container
from functools import partial
from typing import Any, TypeVar

from soda.agent.definition import Agent, load_agent
from soda.agent.runtime import Answer, Toolset
from soda.contracts import (
    Assessment,
    Claims,
    Contract,
    IterationPlan,
    Orientation,
    Planning,
    Verification,
)
from soda.contracts.orient import LearningVerdict
from soda.contracts.outcomes import TaskStatus
from soda.contracts.plan_dag import plan_problems
from soda.errors import InputError, StructuralError
from soda.gate import tested
from soda.gate.runner import TestReport
from soda.loop import planning as planning_mode
from soda.loop.asking import (
    answers_used,
    asked_orientation,
    orient_ask_tools,
    person_answers,
    waiting_for_answers,
)
from soda.loop.context import Iteration
from soda.loop.fit import REPO_MAP, fit_inputs
from soda.loop.repo_guidance import guidance_inputs
from soda.loop.rules_text import tests_and_merges
from soda.loop.session import Session
from soda.repo.refs import branch_head, tree_of
from soda.store import learnings
from soda.store.tasks import TaskIds
from soda.tools import read_only_tools
from soda.tools.sandbox import Sandbox
from soda.tools.toolbox import Suspended
from soda.tools.treemap import TREE_MAPS, RepoMap

PLAN_REPAIRS = 3

Plans = TypeVar("Plans", Orientation, Planning)
Output = TypeVar("Output", bound=Contract)
Inputs = dict[str, Any]
"""An agent's inputs: JSON-able values by name."""
"""What an agent that plans answers: the orienter's Orientation, the planner's Planning."""


def orient(session: Session, it: Iteration, claims: Claims) -> Orientation:
    # A clean checkout of the milestone tip from the pool (the gate tested it
    # there, so it is usually in place already). It lives inside state/, so
    # everything outside it (the database included) is out of the tools' reach;
    # only .git inside it needs denying.
    tip = branch_head(session.repo, session.milestone.branch)
    path = session.checkouts.view(tip)
    sandbox = Sandbox(path)
    checking = read_only_tools(
        sandbox,
        repo_map_tokens=session.config.context.repo_map_tokens,
        tests=(lambda: _tip_tests(session, tip), tip),
    )
    # ask_human: ORIENT stops for the answer. Only for the agents that plan.
    planning = checking.extended(orient_ask_tools(session, it))
    inputs = {
        "spec": session.spec_text(),
        **guidance_inputs(session.config),
        "claims": claims,
        **person_answers(session.db, session.milestone.branch),
    }
    known = TaskIds(session.db, session.milestone.name)  # one lookup per id a plan names
    choice = planning_mode.choose(session, it, claims)  # [loop] planning: a DAG or one task
    for_planner: Inputs = {
        "tests_and_merges": tests_and_merges(session.config, "planner"),
        **choice.planner_inputs(),
        **waiting_for_answers(session.db, session.milestone.branch),
    }
    repo_map = partial(_repo_map, session, tip)  # made only when an agent that plans runs
    try:
        if session.config.loop.orient_pattern == "single":
            for_planner[REPO_MAP] = repo_map()
            orientation = _single(session, it, {**inputs, **for_planner}, planning, known)
        else:
            tools = (checking, planning)
            orientation = _split(session, it, inputs, tools, known, (for_planner, repo_map))
    except Suspended as asked:
        return asked_orientation(str(asked))
    return planning_mode.shape(it, orientation, choice)


def _repo_map(session: Session, tip: str) -> RepoMap:
    """The map of the tip's tree for the agents that plan: the same text for the
    same tree, kept from one iteration to the next (`soda.tools.treemap`)."""
    tree = tree_of(session.repo, tip)
    return TREE_MAPS.map(session.repo, tree, session.config.context.repo_map_tokens)


def _tip_tests(session: Session, tip: str) -> tuple[TestReport, bool]:
    """The tip's tests for the `run_tests` tool: the gate's cached path, so the
    same tree is never tested twice (ACT's baseline reuses the result)."""
    session.jail.ensure_available()
    return tested(session.config, session.jail, session.db, session.checkouts, tip)


def _single(
    session: Session, it: Iteration, inputs: Inputs, tools: Toolset, known: Container[int]
) -> Orientation:
    return _until_valid(session, it, load_agent("orienter", Orientation), inputs, tools, known)


def _split(
    session: Session,
    it: Iteration,
    inputs: Inputs,
    tools: tuple[Toolset, Toolset],
    known: Container[int],
    for_planner: tuple[Inputs, Callable[[], RepoMap]],
) -> Orientation:
    """Verifier, assessor, then planner. `tools`: the checking agents' (no
    ask_human), then the planner's; `for_planner`: the planner's own inputs,
    and its repository map (made when the planner runs)."""
    checking, planning_tools = tools
    # The verifier is told the test command and the gate's rules, as it judges
    # claims of tested and merged work by them (and on a model whose shortest
    # cacheable prefix is 4,096 tokens, the stable text puts its prefix past it).
    rules = {"tests_and_merges": tests_and_merges(session.config, "verifier")}
    verifier = load_agent("verifier", Verification)
    verification = _run(it, verifier, {**inputs, **rules}, checking).value
    inputs = {**inputs, "verification": verification}
    assessment = _run(it, load_agent("assessor", Assessment), inputs, checking).value
    if assessment.spec_satisfied is True:
        planning = Planning(
            actionable_work_exists=False,
            new_tasks=[],
            iteration_plan=None,
            stuck_reason=None,
            learnings=[],
        )
    else:
        planner_inputs, repo_map = for_planner
        inputs = {**inputs, "assessment": assessment, **planner_inputs, REPO_MAP: repo_map()}
        planning = _plan(session, it, inputs, planning_tools, known)
    return Orientation(
        spec_satisfied=assessment.spec_satisfied,
        actionable_work_exists=planning.actionable_work_exists,
        confidence=assessment.confidence,
        summary=assessment.summary,
        task_updates=verification.task_updates,
        new_tasks=planning.new_tasks,
        gaps=assessment.gaps,
        iteration_plan=planning.iteration_plan,
        stuck_reason=planning.stuck_reason,
        learnings=verification.learnings + planning.learnings,
        learning_verdicts=verification.learning_verdicts,
    )


def _plan(
    session: Session, it: Iteration, inputs: Inputs, tools: Toolset, known: Container[int]
) -> Planning:
    return _until_valid(session, it, load_agent("planner", Planning), inputs, tools, known)


def _until_valid(
    session: Session,
    it: Iteration,
    agent: Agent[Plans],
    inputs: Inputs,
    tools: Toolset,
    known: Container[int],
) -> Plans:
    """Run the agent that plans until its plan passes the semantic checks: the
    problems go back to it, at most PLAN_REPAIRS times in all, then HALT."""
    problems: list[str] = []
    for attempt in range(1, PLAN_REPAIRS + 1):
        answer = _run(it, agent, _with_problems(inputs, problems), tools).value
        problems = _problems(session, it, answer.iteration_plan, known, attempt)
        if not problems:
            return answer
    raise _invalid(agent.name, problems)


def _run(it: Iteration, agent: Agent[Output], inputs: Inputs, tools: Toolset) -> Answer[Output]:
    """The agent's answer, its inputs shrunk to fit its model's window first."""
    return it.runner.run(agent, fit_inputs(it.runner, agent, inputs, tools), tools)


def _with_problems(inputs: Inputs, problems: list[str]) -> Inputs:
    """The agent's inputs, with the last rejected plan's problems (a repair round)."""
    if not problems:
        return inputs
    return {**inputs, "rejected_plan_problems": "\n".join(f"- {p}" for p in problems)}


def _problems(
    session: Session, it: Iteration, plan: IterationPlan | None, known: Container[int], attempt: int
) -> list[str]:
    """What is wrong with a plan (none for no plan); a rejection is an event."""
    if plan is None:
        return []
    problems = plan_problems(plan, known, session.config.plan.max_tasks)
    if problems:
        it.events.emit("plan.rejected", {"attempt": attempt, "problems": problems})
    return problems


def _invalid(agent: str, problems: list[str]) -> StructuralError:
    return StructuralError(
        f"{agent} produced an invalid plan {PLAN_REPAIRS} times; "
        f"last problems: {'; '.join(problems)}"
    )


def apply_orientation(session: Session, it: Iteration, orientation: Orientation) -> Orientation:
    """Write ORIENT's conclusions to Trace and learnings; return the orientation
    with every plan task bound to a Trace task."""
    iteration_id = it.id
    tracker = session.tracker
    # The person's answers ORIENT was given are spent.
    answers_used(session.db, session.milestone.branch)
    for update in orientation.task_updates:
        _apply_update(session, it, update.task_id, update.action, update.reason)
    root = session.milestone.root_task_id
    for task in orientation.new_tasks:
        tracker.create(
            task.title,
            task.description,
            parent_id=root,
            risk=task.risk,
            author="orient",
            iteration_id=iteration_id,
        )
    _apply_verdicts(session, it, orientation.learning_verdicts)
    session.store_learnings(orientation.learnings, "orient", iteration_id)
    plan = orientation.iteration_plan
    if plan is None:
        return orientation
    bound = []
    for planned in plan.tasks:
        if planned.task_id is None:
            # A plan task titled like an open task is bound to it (Trace merges).
            created = tracker.create(
                planned.title,
                planned.description,
                parent_id=root,
                risk=planned.risk,
                author="orient",
                iteration_id=iteration_id,
            )
            planned = planned.model_copy(update={"task_id": created.id})
        bound.append(planned)
    return orientation.model_copy(
        update={
            "iteration_plan": IterationPlan(intent=plan.intent, approach=plan.approach, tasks=bound)
        }
    )


def _apply_verdicts(session: Session, it: Iteration, verdicts: list[LearningVerdict]) -> None:
    """Retire the learnings the verifier judged stale (`learning.retired`); a
    verdict naming no active learning is noted and skipped."""
    for verdict in verdicts:
        if verdict.keep:
            continue
        if learnings.retire(session.db, verdict.learning_id, verdict.reason, it.id):
            kind = "learning.retired"
        else:
            kind = "learning.verdict_skipped"
        it.events.emit(kind, {"learning_id": verdict.learning_id, "reason": verdict.reason})


def _apply_update(session: Session, it: Iteration, task_id: int, action: str, reason: str) -> None:
    tracker = session.tracker
    try:
        task = tracker.show(task_id)
    except InputError as exc:
        # A model naming a task that is not there is noted, not fatal.
        it.events.emit("trace.update_skipped", {"task_id": task_id, "reason": str(exc)})
        return
    if action == "close" and task.status != TaskStatus.CLOSED:
        tracker.close(task_id, reason)
        if task.created_at < session.run_started:  # a task of this run's own making is not
            it.progress.append(f"task {task_id} closed")  # progress: see soda.loop.progress
    elif action == "block" and task.status != TaskStatus.BLOCKED:
        tracker.block(task_id, reason)
    elif action == "unblock" and task.status == TaskStatus.BLOCKED:
        tracker.unblock(task_id)
    tracker.comment(task_id, "orient", f"{action}: {reason}", iteration_id=it.id)
