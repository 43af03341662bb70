"""`soda demo`: the whole loop, offline, on a generated sample project.

Builds a small Python project with a spec and failing acceptance tests, sets
soda up there with the scripted provider (a shipped script stands in for the
model; every tool call it makes is real); `soda demo` then runs the loop until DONE.
"""

from __future__ import annotations

import importlib.util
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from soda.cli.init import init_project
from soda.config import CONFIG_NAME, ActConfig, Config, ModelConfig, ProjectConfig, load
from soda.errors import InputError
from soda.loop.host import Run, open_run
from soda.repo.git import commit_all, init_repo

ASSETS = Path(__file__).resolve().parent.parent / "demo"
SCRIPT_PATH = "state/demo-script.json"


def prepare(directory: Path) -> Path:
    """Create the sample project in `directory` (new or empty) as a git repository
    with soda set up on the scripted provider; return the config path."""
    if importlib.util.find_spec("pytest") is None:
        raise InputError(
            "soda demo runs the sample project's tests with pytest, which is not installed"
            " next to soda: pip install 'soda-daemon[demo]' (or pip install pytest)"
        )
    if directory.exists() and any(directory.iterdir()):
        raise InputError(f"{directory} is not empty; give soda demo a new or empty directory")
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copytree(ASSETS / "sample", directory, dirs_exist_ok=True)
    (directory / "specs").mkdir()
    shutil.copy(ASSETS / "spec.md", directory / "specs" / "SPEC.md")
    python = shlex.quote(sys.executable)
    config = Config(
        # The sample's tests need no pytest plugins: not loading whatever else is
        # installed next to soda (hypothesis alone costs ~1 s) keeps each run fast.
        project=ProjectConfig(
            test_command=f"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {python} -m pytest -q"
        ),
        model=ModelConfig(
            provider="scripted", script=SCRIPT_PATH, strong="scripted", fast="scripted"
        ),
        # The script answers in order: a retry of a failed task would ask it for
        # answers it does not have.
        act=ActConfig(task_retries=0),
    )
    repo = init_repo(directory)
    init_project(directory, config)
    script = (ASSETS / "script.json").read_text(encoding="utf-8")
    # The script's commands must run with the Python soda runs on.
    (directory / SCRIPT_PATH).write_text(script.replace("{python}", python.replace('"', '\\"')))
    commit_all(repo, "Sample project with a spec and failing acceptance tests")
    return directory / CONFIG_NAME


NO_COST_NOTE = (
    "Tokens and cost are 0: the scripted model makes no paid calls. On a real model each",
    "row shows the iteration's tokens and USD cost, summed from the agent_calls table",
    "(`soda show N` lists every call with its tokens, cache use, cost and what the agent said).",
)
"""What `soda demo` says under its history table about the zeros in it."""


def start_demo(directory: Path | None, say: Callable[[str], None]) -> tuple[Path, Run]:
    """Create the sample project in `directory` (default: a new temporary
    directory) and open a run of the loop on it (soda.loop.host)."""
    target = directory or Path(tempfile.mkdtemp(prefix="soda-demo-"))
    say(f"soda demo in {target}")
    say("The model is SCRIPTED: a shipped script stands in for the LLM, so no network or key")
    say("is needed. Everything else is real: git worktrees, tool calls, tests, the merge gate.")
    config = load(prepare(target.resolve()))
    return target, open_run(config)
