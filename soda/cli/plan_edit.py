"""`soda approve N --edit`: the waiting plan, opened in the person's editor as
JSON, read back and checked before it is queued.

An edit is refused (InputError: one line, exit 2, nothing queued, the original
plan still waiting) when it is not JSON, breaks the plan contract, or fails
`soda.human.approval.edit_problems` (task keys, dependencies, cycles, Trace
tasks, `[plan] max_tasks`). The daemon checks it again when it takes it.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import tempfile
from pathlib import Path

from sqlite_utils import Database

from soda.config import Config
from soda.contracts import IterationPlan, validate
from soda.errors import InputError, Violation
from soda.human.approval import edit_problems
from soda.store import history

KEEP = "the original plan still waits"


def waiting_plan(db: Database, number: int) -> IterationPlan:
    """Iteration `number`'s plan as ORIENT left it (bound to Trace tasks)."""
    row = history.iteration(db, number)
    plan = (
        json.loads(row["orient_json"]).get("iteration_plan") if row and row["orient_json"] else None
    )
    if plan is None:
        raise InputError(f"iteration {number} has no plan to edit (yet); see `soda show {number}`")
    return IterationPlan.model_validate(plan)


def edit_plan(plan: IterationPlan, db: Database, config: Config) -> IterationPlan:
    """The plan as the person left it in their editor, checked."""
    handle, name = tempfile.mkstemp(prefix="soda-plan-", suffix=".json")
    path = Path(name)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(json.dumps(plan.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n")
        _run_editor(path)
        return checked(path.read_text(encoding="utf-8"), db, config)
    finally:
        path.unlink(missing_ok=True)


def checked(text: str, db: Database, config: Config) -> IterationPlan:
    """An edited plan's text as a valid plan, or an InputError saying why not."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"edited plan refused: invalid JSON at line {exc.lineno}, column {exc.colno}: "
            f"{exc.msg}; {KEEP}"
        ) from None
    plan = validate("plan", data, IterationPlan)
    if isinstance(plan, Violation):
        raise InputError(
            f"edited plan refused: plan contract violated at {plan.path}: {plan.message}; {KEEP}"
        )
    problems = edit_problems(plan, db, config)
    if problems:
        raise InputError(f"edited plan refused: {'; '.join(problems)}; {KEEP}")
    return plan


def _run_editor(path: Path) -> None:
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    try:
        argv = [*shlex.split(editor), str(path)]
        # An interactive program: it needs the person's terminal, so it does not go
        # through soda.system.proc (which gives children /dev/null and captures output).
        done = subprocess.run(argv, check=False)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot start the editor {editor!r}: {exc}; {KEEP}") from None
    if done.returncode != 0:
        raise InputError(f"the editor {editor!r} exited with {done.returncode}; nothing queued")
