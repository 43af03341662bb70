"""`soda approve N --edit`: the waiting plan, opened in the person's editor as
JSON, and the text the person left there.

`soda.human.commands.edit` checks the text before it is queued: an edit is
refused (InputError: one line, exit 2, nothing queued, the original plan still
waiting) when it is not JSON, breaks the plan contract, or fails
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

from soda.contracts import IterationPlan
from soda.errors import InputError
from soda.human.commands import KEEP

__all__ = ["edit_text"]


def edit_text(plan: IterationPlan) -> str:
    """The plan as the person left it in their editor (unchecked text)."""
    handle, name = tempfile.mkstemp(prefix="soda-plan-", suffix=".json")
    path = Path(name)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(json.dumps(plan.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n")
        _run_editor(path)
        return path.read_text(encoding="utf-8")
    finally:
        path.unlink(missing_ok=True)


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
