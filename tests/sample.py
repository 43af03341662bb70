"""The one sample-project factory: the demo's small Python project (calc.py, its
tests, a spec with failing acceptance tests, soda.toml with the scripted model),
made in a temporary directory as `soda demo` makes it, with what a test changes.

    root = sample_project(tmp_path)                                # as the demo has it
    root = sample_project(tmp_path, responses=[...])               # its own model script
    root = sample_project(tmp_path, settings={"old": "new"})       # soda.toml lines replaced

`responses` is a scripted model's script (soda/llm/scripted.py); `{python}` in it
becomes this interpreter's path, so a scripted command runs the tests' Python.
Each `settings` key must appear in soda.toml (a drifted key fails at once).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from soda.cli.demo import SCRIPT_PATH, prepare

PYTHON = json.dumps(sys.executable)[1:-1]
"""This interpreter's path, as it reads inside a JSON string."""


def sample_project(
    tmp_path: Path,
    *,
    responses: list[dict[str, Any]] | None = None,
    settings: dict[str, str] | None = None,
    name: str = "project",
) -> Path:
    """The demo's project at `tmp_path / name`; its root."""
    root = tmp_path / name
    config = prepare(root)
    if responses is not None:
        text = json.dumps({"responses": responses}).replace("{python}", PYTHON)
        (root / SCRIPT_PATH).write_text(text)
    if settings:
        text = config.read_text()
        for old, new in settings.items():
            assert old in text, f"soda.toml has no {old!r}"
            text = text.replace(old, new)
        config.write_text(text)
    return root
