"""Human inputs that soda applies directly, before ORIENT sees the claims.

Some inputs need no judgment: a spec change rewrites the spec file (so ORIENT
assesses the new text), and task overrides (close, reopen, skip) change Trace.
These are applied at SENSE and marked applied with what was done. Everything
else (corrections, prioritise, constraints) stays pending and reaches ORIENT in
the human claims; constraints are also kept as learnings so later iterations
remember them.
"""

from __future__ import annotations

import os
from pathlib import Path

from soda import inbox
from soda.contracts import HumanInput
from soda.errors import InputError
from soda.session import Session


def apply_direct_inputs(session: Session, iteration: int) -> list[str]:
    """Apply spec changes and task overrides; return one line per action taken."""
    done: list[str] = []
    for item in inbox.pending(session.db):
        response = _apply(session, item.payload, iteration)
        if response is None:
            continue
        if item.payload.kind == "spec_change" or item.payload.action in ("close", "reopen", "skip"):
            inbox.mark_applied(session.db, [item.id], iteration, response)
        session.events.emit("human.applied", {"id": item.id, "response": response})
        done.append(response)
    return done


def _apply(session: Session, item: HumanInput, iteration: int) -> str | None:
    if item.kind == "spec_change":
        return _change_spec(session.config.spec_path, item)
    if item.kind != "override":
        return None
    tracker = session.tracker
    try:
        if item.action == "close" and item.task_id is not None:
            tracker.close(item.task_id, item.text or "closed by a person")
            return f"closed task #{item.task_id}"
        if item.action == "reopen" and item.task_id is not None:
            tracker.reopen(item.task_id, item.text or "reopened by a person")
            return f"reopened task #{item.task_id}"
        if item.action == "skip" and item.task_id is not None:
            tracker.block(
                item.task_id, f"skipped by a person{': ' + item.text if item.text else ''}"
            )
            return f"task #{item.task_id} set aside (blocked) as asked"
    except InputError as exc:
        return f"could not apply: {exc}"
    if item.action == "constraint" and item.text:
        session.store_learnings([f"Constraint from a person: {item.text}"], "human", None)
        return None  # stays pending so ORIENT reads it this iteration
    return None


def _change_spec(path: Path, item: HumanInput) -> str:
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
