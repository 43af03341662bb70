"""Inputs that need no judgment, applied at SENSE before ORIENT sees the claims.

A spec change rewrites the spec file (so ORIENT assesses the new text), and
task overrides (close, reopen, skip) change Trace. A constraint is not applied
here: it is kept as a learning, so later iterations remember it, and reaches
ORIENT with the other claims. Which input is which is `soda.human.routing`'s.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from sqlite_utils import Database

from soda.contracts import HumanInput
from soda.errors import InputError
from soda.events import Events
from soda.store import questions

if TYPE_CHECKING:
    from soda.trace import Tracker


def apply_input(item: HumanInput, tracker: Tracker, spec_path: Path) -> str:
    """Apply a SENSE-routed input; return what was done, for the person."""
    if item.kind == "spec_change":
        return change_spec(spec_path, item)
    assert item.kind == "override" and item.task_id is not None  # by the contract
    try:
        if item.action == "close":
            tracker.close(item.task_id, item.text or "closed by a person")
            return f"closed task #{item.task_id}"
        if item.action == "reopen":
            tracker.reopen(item.task_id, item.text or "reopened by a person")
            return f"reopened task #{item.task_id}"
        if item.action == "skip":
            reason = f"skipped by a person{': ' + item.text if item.text else ''}"
            tracker.block(item.task_id, reason)
            return f"task #{item.task_id} set aside (blocked) as asked"
    except InputError as exc:
        return f"could not apply: {exc}"
    raise ValueError(f"override {item.action!r} is not applied at SENSE")


def learning(item: HumanInput) -> str | None:
    """The learning a remembered input (a constraint) leaves, if it says anything."""
    return f"Constraint from a person: {item.text}" if item.text else None


def change_spec(path: Path, item: HumanInput) -> str:
    text = item.text or ""
    if item.mode == "replace":
        new = text.rstrip() + "\n"
    else:
        current = path.read_text(encoding="utf-8")
        new = current.rstrip() + "\n\n" + text.strip() + "\n"
    temp = path.with_name(f".{path.name}.soda-tmp")
    temp.write_text(new, encoding="utf-8")
    os.replace(temp, path)  # whole or not at all
    return f"spec {'replaced' if item.mode == 'replace' else 'amended'} in {path.name}"


def record_answer(item: HumanInput, db: Database, events: Events) -> str:
    """Record a person's answer to an agent's question (an ANSWER-routed input)."""
    assert item.kind == "answer" and item.target is not None and item.text  # by the contract
    question = questions.get(db, item.target)
    if question is None:
        return f"no question {item.target}; answer not used"
    if not questions.answer(db, item.target, item.text):
        return f"question {item.target} is {question.status}; answer not used"
    events.emit("question.answered", {"question": item.target, "task": question.task_key})
    return f"answered question {item.target}; its task resumes"
