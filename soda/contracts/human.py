"""What a person tells soda (contract `human_input`): inbox files and `soda tell`."""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from soda.contracts.base import Contract
from soda.contracts.orient import IterationPlan

HumanKind = Literal[
    "correction",
    "override",
    "spec_change",
    "approve",
    "reject",
    "pause",
    "resume",
    "stop",
    "cancel",
    "plan_edit",
    "answer",
]


class HumanInput(Contract):
    """What a person drops into state/inbox/ (or says through `soda tell`)."""

    kind: HumanKind
    """correction: guidance in `text`; override: `action` on `task_id` (or a
    constraint in `text`); spec_change: new spec text (`mode` replace or amend);
    approve / reject: `target` plan or iteration id; plan_edit: approve `target`'s
    waiting plan as edited in `plan`; answer: `text` answers question `target`
    (asked by an agent, see `soda status`); pause, resume, stop, cancel: control
    the loop."""
    text: str | None = None
    """Free text: the correction, the constraint, the new spec, or a reason."""
    action: Literal["skip", "prioritise", "reopen", "close", "constraint"] | None = None
    """For override: what to do with the task (constraint adds a rule in `text`)."""
    task_id: int | None = None
    """For override: the Trace task."""
    target: int | None = None
    """For approve / reject / plan_edit: the iteration whose plan is meant; for
    answer: the question's id."""
    mode: Literal["replace", "amend"] | None = None
    """For spec_change: replace the spec with `text`, or append `text` to it."""
    plan: IterationPlan | None = None
    """For plan_edit: the edited plan (contract `plan`) to run instead of the waiting one."""

    @model_validator(mode="after")
    def _fields_for_kind(self) -> HumanInput:
        need: dict[str, tuple[str, ...]] = {
            "correction": ("text",),
            "spec_change": ("text",),
            "approve": ("target",),
            "reject": ("target",),
            "plan_edit": ("target", "plan"),
            "answer": ("target", "text"),
            "override": ("action",),
        }
        for name in need.get(self.kind, ()):
            if getattr(self, name) is None:
                raise ValueError(f"kind {self.kind!r} needs {name!r}")
        if self.kind == "override":
            if self.action == "constraint" and not self.text:
                raise ValueError("override action 'constraint' needs 'text'")
            if self.action != "constraint" and self.task_id is None:
                raise ValueError(f"override action {self.action!r} needs 'task_id'")
        return self
