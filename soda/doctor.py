"""`soda doctor`: check that everything a run needs is in place, one line each.

Checks run in order and never raise: config, git (repository, base branch),
the test command (its program exists), the state database (opens, migrated),
and the provider (key present; with `ping`, one tiny real request).
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from soda.config import Config, find_config, load
from soda.errors import SodaError
from soda.git import open_repo
from soda.llm import make_model
from soda.llm.base import Message, ModelRequest, ToolSpec, ignore_event
from soda.store import open_db


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def run_checks(directory: Path, ping: bool = False) -> list[Check]:
    checks: list[Check] = []
    try:
        config = load(find_config(directory))
    except SodaError as exc:
        return [Check("config", False, str(exc).replace("\n", "; "))]
    checks.append(Check("config", True, f"{config.root / 'soda.toml'} is valid"))
    for name, probe in (
        ("git", _git),
        ("tests", _test_command),
        ("state", _state),
        ("provider", lambda c: _provider(c, ping)),
    ):
        checks.append(_guarded(name, probe, config))
    return checks


def _guarded(name: str, probe: Callable[[Config], str], config: Config) -> Check:
    try:
        return Check(name, True, probe(config))
    except SodaError as exc:
        return Check(name, False, str(exc).replace("\n", "; "))
    except Exception as exc:  # a doctor reports; it does not crash
        return Check(name, False, f"{type(exc).__name__}: {exc}")


def _git(config: Config) -> str:
    repo = open_repo(config.root)
    base = config.project.base_branch
    if base not in {head.name for head in repo.heads}:
        raise SodaError(f"base branch {base!r} does not exist (project.base_branch)")
    return f"repository {repo.working_tree_dir}, base branch {base}"


def _test_command(config: Config) -> str:
    command = config.project.test_command
    program = shlex.split(command)[0] if command.strip() else ""
    if not program or shutil.which(program, path=os.environ.get("PATH")) is None:
        raise SodaError(f"project.test_command: program {program!r} not found on PATH")
    return f"{command!r} ({shutil.which(program)})"


def _state(config: Config) -> str:
    db = open_db(config.db_path)
    count = db.execute("SELECT count(*) FROM _migrations").fetchone()[0]
    mode = db.execute("PRAGMA journal_mode").fetchone()[0]
    return f"{config.db_path} ({count} migrations, {mode})"


def _provider(config: Config, ping: bool) -> str:
    model_config = config.model
    if model_config.provider == "scripted":
        return f"scripted model replaying {config.script_path} (no network)"
    if model_config.provider == "anthropic" and not os.environ.get(model_config.api_key_env):
        raise SodaError(f"{model_config.api_key_env} is not set; export your Anthropic API key")
    where = model_config.base_url or "default endpoint"
    if not ping:
        return f"{model_config.provider} ({where}); key present; --ping sends one tiny request"
    model = make_model(config, ignore_event)
    answer = ToolSpec(
        "submit",
        "Answer.",
        {
            "type": "object",
            "properties": {"ok": {"type": "boolean"}},
            "required": ["ok"],
            "additionalProperties": False,
        },
    )
    response = model.complete(
        ModelRequest(
            agent="doctor",
            model=model_config.fast,
            system="Reply with ok = true.",
            messages=[Message(role="user", text="ping")],
            tools=[answer],
            answer_tool="submit",
            max_tokens=32,
        )
    )
    return f"{model_config.provider} answered with {response.model} in {response.latency_ms} ms"
