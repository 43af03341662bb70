"""ORIENT's first message, shrunk to fit the model's context window.

ORIENT's agents read the spec and the claims (and, later in the split pattern,
the earlier agents' conclusions). On a small window the whole first request may
not fit: before each agent runs, its inputs lose what matters least, in a fixed
order, until soda's estimate says the request fits (`AgentRunner.overflow`):

1. the repository map (the input `repo_map` of the agents that plan), its last
   lines first (it lists the most relevant files first);
2. the learnings, oldest first;
3. the history: older iterations first, then the last attempt's detail (its
   failing tests, task summaries and diffstat);
4. the rest of the claims that can be cut: task comments, recently closed tasks,
   the commit list, the changed-file lists, the failing tests' list.

Each step halves what is left of a list (a map, by lines) until it is empty or
the request fits. What was left out is said at the end of the claims, so the
model knows to look it up with its tools. The spec, the open work, the person's
words and the inputs' names and order never change. A request that still does
not fit is refused by the runner (`ContextTooSmall`: a person must give the model
a larger window). Each shrink is an event, `agent.inputs_shrunk`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from soda.agent.definition import Agent
from soda.agent.runtime import AgentRunner, Toolset
from soda.contracts import Claims
from soda.tools.treemap import RepoMap

REPO_MAP = "repo_map"
Inputs = dict[str, Any]


@dataclass(frozen=True)
class ShrunkClaims:
    """Claims with parts left out: rendered as the claims' own text, then a line
    saying what is missing (an input renders through `prompt_parts`)."""

    claims: Claims
    left_out: tuple[str, ...]

    def prompt_text(self) -> str:
        return "\n\n".join(part for part in self.prompt_parts() if part)

    def prompt_parts(self) -> tuple[str, ...]:
        """The claims' parts, the note with the last (what changes every iteration)."""
        *lasting, changing = self.claims.prompt_parts()
        note = (
            f"(Left out to fit the model's context window: {'; '.join(self.left_out)}. "
            "Look them up with your tools if you need them.)"
        )
        return *lasting, f"{changing}\n\n{note}" if changing else note


Cut = Callable[[Claims], tuple[Claims, str] | None]
"""One halving of a part of the claims: the shorter claims and what was cut, or
None when that part is empty already."""


def fit_inputs(runner: AgentRunner, agent: Agent[Any], inputs: Inputs, tools: Toolset) -> Inputs:
    """`inputs`, shrunk in the fixed order until the agent's first request fits its
    window; as they were when they fit already."""
    before = runner.overflow(agent, inputs, tools)
    if before <= 0:
        return inputs
    shrunk = dict(inputs)
    claims = inputs.get("claims")
    left_out: list[str] = []

    def fits() -> bool:
        if isinstance(claims, Claims) and left_out:
            shrunk["claims"] = ShrunkClaims(claims, tuple(dict.fromkeys(left_out)))
        return runner.overflow(agent, shrunk, tools) <= 0

    fitted = False
    while not fitted and (halved := _halved_map(shrunk.get(REPO_MAP))) is not None:
        shrunk[REPO_MAP] = halved
        left_out.append("the repository map (in part)")
        fitted = fits()
    for cut in (cut for step in STEPS for cut in step):
        while not fitted and isinstance(claims, Claims):
            cutting = cut(claims)
            if cutting is None:
                break
            claims, what = cutting
            left_out.append(what)
            fitted = fits()
    runner.record.event(
        "agent.inputs_shrunk",
        {
            "agent": agent.name,
            "tokens_over": before,
            "left_out": list(dict.fromkeys(left_out)),
            "fits": fitted,
        },
    )
    return shrunk


def _halved_map(value: Any) -> Any:
    """The map (a `RepoMap`, or its text) without the last half of its lines (the
    least relevant files); None when it has no lines left."""
    if isinstance(value, RepoMap):
        return value.halved() if value.listing.strip() else None
    if isinstance(value, str) and value.strip():
        lines = value.splitlines()
        return "\n".join(lines[: len(lines) // 2])
    return None


def _halve(items: list[Any]) -> list[Any]:
    """The first half (lists in the claims are newest or most relevant first)."""
    return items[: len(items) // 2]


def _learnings(claims: Claims) -> tuple[Claims, str] | None:
    project = claims.project
    if not project.learnings:
        return None
    project = project.model_copy(update={"learnings": _halve(project.learnings)})
    return claims.model_copy(update={"project": project}), "older learnings"


def _iterations(claims: Claims) -> tuple[Claims, str] | None:
    project = claims.project
    if not project.recent:
        return None
    project = project.model_copy(update={"recent": _halve(project.recent)})
    return claims.model_copy(update={"project": project}), "older iterations"


def _last_act(claims: Claims) -> tuple[Claims, str] | None:
    act = claims.project.last_act
    if act is None or not (act.failing or act.tasks or act.diffstat):
        return None
    act = act.model_copy(update={"failing": [], "tasks": [], "diffstat": ""})
    project = claims.project.model_copy(update={"last_act": act})
    return claims.model_copy(update={"project": project}), "the last attempt's detail"


def _comments(claims: Claims) -> tuple[Claims, str] | None:
    work = claims.work
    if not work.comments:
        return None
    work = work.model_copy(update={"comments": _halve(work.comments)})
    return claims.model_copy(update={"work": work}), "older task comments"


def _closed(claims: Claims) -> tuple[Claims, str] | None:
    work = claims.work
    if not work.recently_closed:
        return None
    work = work.model_copy(update={"recently_closed": _halve(work.recently_closed)})
    return claims.model_copy(update={"work": work}), "recently closed tasks"


def _commits(claims: Claims) -> tuple[Claims, str] | None:
    code = claims.code
    if not code.commits:
        return None
    code = code.model_copy(update={"commits": _halve(code.commits)})
    return claims.model_copy(update={"code": code}), "older commits"


def _changed_files(claims: Claims) -> tuple[Claims, str] | None:
    code = claims.code
    if not (code.diffstat or code.files_changed):
        return None
    code = code.model_copy(update={"diffstat": "", "files_changed": []})
    return claims.model_copy(update={"code": code}), "the files changed since the base"


def _failing(claims: Claims) -> tuple[Claims, str] | None:
    tests = claims.code.tests
    if tests is None or not tests.failing:
        return None
    tests = tests.model_copy(update={"failing": _halve(tests.failing)})
    code = claims.code.model_copy(update={"tests": tests})
    return claims.model_copy(update={"code": code}), "some failing tests"


STEPS: tuple[tuple[Cut, ...], ...] = (
    (_learnings,),
    (_iterations, _last_act),
    (_comments, _closed, _commits, _changed_files, _failing),
)
"""After the repository map: learnings, history, then the rest of the claims."""
