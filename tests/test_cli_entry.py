"""The entry point imports only the asked command's module (`soda.cli.entry`):
its table must name every command the modules register, and only those."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from soda.cli.entry import HOMES, command_named, root_options
from soda.cli.main import app


def test_every_registered_command_has_its_home() -> None:
    registered = {
        (c.name or c.callback.__name__.replace("_", "-")): c.callback.__module__
        for c in app.registered_commands
        if c.callback is not None
    }
    groups = {g.name: g.typer_instance for g in app.registered_groups if g.name}
    assert set(HOMES) == set(registered) | set(groups)
    for name, module in registered.items():
        assert module.removeprefix("soda.cli.") in HOMES[name], name
    for name, group in groups.items():
        modules = {c.callback.__module__ for c in group.registered_commands if c.callback}
        assert {m.removeprefix("soda.cli.") for m in modules} == set(HOMES[name]), name


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["status"], "status"),
        (["-C", "repo", "history", "--limit", "1"], "history"),
        (["--dir", "repo", "fleet", "status"], "fleet"),
        (["--dir=repo", "tell", "x"], "tell"),
        (["--version"], None),
        (["-h"], None),
        ([], None),
    ],
)
def test_the_command_is_the_first_word_past_the_roots_options(
    args: list[str], named: str | None
) -> None:
    assert command_named(args) == named


def test_the_roots_options_stop_at_the_command_and_skip_a_value() -> None:
    assert root_options(["--version"]) == ["--version"]
    assert root_options(["-C", "--version"]) == ["-C"]  # the directory's name
    assert root_options(["status", "--version"]) == []


def test_a_command_loads_only_its_module_and_help_lists_all(tmp_path: Path) -> None:
    probe = (
        "import sys; sys.argv = ['soda', *sys.argv[1:]]\n"
        "from soda.cli import entry\n"
        "try:\n    entry.main()\n"
        "except SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('soda.cli.')))\n"
    )

    def loaded(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", probe, *args], cwd=tmp_path, capture_output=True, text=True
        )
        return done.stdout

    one = loaded("history", "--help")
    assert "soda.cli.view" in one and "soda.cli.issues" not in one and "soda.cli.mcp" not in one
    everything = loaded("--help")
    for name in ("history", "issues", "mcp", "fleet", "tell", "worker"):
        assert name in everything
    assert "soda.cli.issues" in everything
    version = loaded("--version")  # the root's eager option: no command's module
    assert version.startswith("soda ") and "soda.cli.view" not in version
    assert "soda.cli.main" not in version
    unknown = subprocess.run(
        [sys.executable, "-m", "soda", "histroy"], cwd=tmp_path, capture_output=True, text=True
    )
    assert unknown.returncode == 2 and "No such command 'histroy'" in unknown.stderr
