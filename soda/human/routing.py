"""Where each human input goes: the one table that says so.

Every input the `human_input` contract admits has exactly one route, chosen by
its kind (and, for an override, its action):

    SENSE    needs no judgment: applied before ORIENT looks, marked applied
    ORIENT   shown to ORIENT as a human claim, claimed, marked read
    VERDICT  answers a plan or merge that waits for a person's approval
    EDIT     approves a waiting plan as the person edited it (`approve N --edit`)
    ANSWER   answers an agent's question (`soda answer Q`): recorded at SENSE
    CONTROL  acts on the loop: the daemon takes it while idle, ACT takes a
             `cancel` while a plan runs

The table is checked against the contract on import, so a new kind or action
that nobody routes fails at once rather than waiting in the queue forever. What
follows from it is derived or checked here too: the kinds ORIENT sees
(`ORIENT_SEES`, read by `soda.human.for_orient`, which is what SENSE shows) and
the idle daemon's answer to each CONTROL kind (`IDLE_RESPONSES`), the kinds
that answer a waiting plan (`VERDICT_KINDS`), the controls by name (`Control`)
and those a host applies between iterations (`HOST_CONTROLS`), and the
guidance the executor is told (`GUIDANCE_KINDS`). No other module lists input
kinds: a face asks `soda.human.commands`, a host reads these.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import get_args

from soda.contracts import HumanInput, HumanKind


class Route(enum.Enum):
    SENSE = "applied at SENSE"
    ORIENT = "claimed by ORIENT"
    VERDICT = "approval verdict"
    EDIT = "edited plan, approved"
    ANSWER = "answer to a question"
    CONTROL = "control"


Key = tuple[str, str | None]
"""(kind, action): the action only for an override, None otherwise."""

ROUTES: dict[Key, Route] = {
    ("correction", None): Route.ORIENT,
    ("override", "prioritise"): Route.ORIENT,
    ("override", "constraint"): Route.ORIENT,  # and kept as a learning at SENSE
    ("override", "close"): Route.SENSE,
    ("override", "reopen"): Route.SENSE,
    ("override", "skip"): Route.SENSE,
    ("spec_change", None): Route.SENSE,
    ("approve", None): Route.VERDICT,
    ("reject", None): Route.VERDICT,
    ("plan_edit", None): Route.EDIT,
    ("answer", None): Route.ANSWER,
    ("pause", None): Route.CONTROL,
    ("resume", None): Route.CONTROL,
    ("stop", None): Route.CONTROL,
    ("cancel", None): Route.CONTROL,
}

REMEMBERED: frozenset[Key] = frozenset({("override", "constraint")})
"""Inputs SENSE also keeps as a learning, so later iterations remember them."""

ORIENT_SEES: frozenset[Route] = frozenset({Route.ORIENT, Route.SENSE})
"""Routes whose pending inputs reach ORIENT's human claims. SENSE inputs are
applied before ORIENT looks; one still pending is shown rather than hidden."""

PAUSE_KINDS = ("pause", "resume")
"""Control inputs whose newest one says whether soda is paused."""

IDLE_RESPONSES: dict[str, str] = {
    "pause": "paused: no iterations until resume",
    "resume": "resumed",
    "stop": "daemon stopping",
    "cancel": "no plan was running; nothing to cancel",
}
"""What a control input did when it arrived while no iteration ran: one answer
per kind routed CONTROL (checked on import, so the idle daemon never meets a
control kind it cannot answer)."""


class Control(enum.StrEnum):
    """The kinds routed CONTROL, by name (checked on import)."""

    PAUSE = "pause"
    RESUME = "resume"
    STOP = "stop"
    CANCEL = "cancel"
    """Acts on the plan ACT runs; every other control acts on the host."""


def key(item: HumanInput) -> Key:
    return (item.kind, item.action if item.kind == "override" else None)


def route(item: HumanInput) -> Route:
    """The route of a contract-valid input (the contract admits no other)."""
    return ROUTES[key(item)]


def kinds_routed(routes: Iterable[Route]) -> frozenset[str]:
    """Kinds with at least one (kind, action) going to one of `routes`."""
    wanted = set(routes)
    return frozenset(kind for (kind, _), where in ROUTES.items() if where in wanted)


def contract_keys() -> frozenset[Key]:
    """Every (kind, action) the `human_input` contract admits."""
    actions = [a for a in get_args(HumanInput.model_fields["action"].annotation) if a is not None]
    override_actions = [value for literal in actions for value in get_args(literal)]
    return frozenset(
        (kind, action)
        for kind in get_args(HumanKind)
        for action in (override_actions if kind == "override" else [None])
    )


VERDICT_KINDS: frozenset[str] = kinds_routed([Route.VERDICT, Route.EDIT])
"""Kinds that answer a plan or merge waiting for approval (when they name its iteration)."""
EDIT_KINDS: frozenset[str] = kinds_routed([Route.EDIT])
"""Kinds that approve a waiting plan as the person edited it."""
CONTROL_KINDS: frozenset[str] = kinds_routed([Route.CONTROL])
HOST_CONTROLS: frozenset[str] = frozenset(Control) - {Control.CANCEL}
"""Controls the host applies itself between iterations (the daemon while idle,
the fleet's workflow): pause, resume, stop."""
TOLD_KINDS: frozenset[str] = kinds_routed(ORIENT_SEES)
"""Kinds a person tells soda (`soda tell`): guidance and changes, no verdict or control."""
GUIDANCE_KINDS: frozenset[str] = kinds_routed([Route.ORIENT])
"""Kinds the executor is told about (ORIENT's guidance: corrections and overrides;
control and approvals are not its business, spec changes are in the spec)."""


def _check_complete() -> None:
    missing, extra = contract_keys() - ROUTES.keys(), ROUTES.keys() - contract_keys()
    if missing or extra:
        raise RuntimeError(f"human routing out of step with the contract: {missing=} {extra=}")
    control = kinds_routed([Route.CONTROL])
    unanswered, unrouted = control - IDLE_RESPONSES.keys(), IDLE_RESPONSES.keys() - control
    if unanswered or unrouted:
        raise RuntimeError(
            f"IDLE_RESPONSES out of step with the CONTROL routes: {unanswered=} {unrouted=}"
        )
    if not set(PAUSE_KINDS) <= control:
        raise RuntimeError(f"PAUSE_KINDS must be routed CONTROL: {PAUSE_KINDS}")
    if set(Control) != control:
        raise RuntimeError(f"Control out of step with the CONTROL routes: {sorted(control)}")


_check_complete()
