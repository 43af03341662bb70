"""The CLI skeleton driven through typer's runner and, for exit codes and stderr,
through a real subprocess."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from soda import __version__
from soda.cli.main import app
from soda.store import open_db
from tests.conftest import git, soda

runner = CliRunner()


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"soda {__version__}"


def test_init_creates_three_things_and_is_idempotent(repo: Path) -> None:
    first = runner.invoke(app, ["-C", str(repo), "init"])
    assert first.exit_code == 0, first.output
    assert (repo / "soda.toml").is_file()
    assert (repo / "specs" / "SPEC.md").read_text().startswith("# Spec for repo")
    assert (repo / "state" / "soda.db").is_file()
    assert git(repo, "status", "--porcelain").splitlines() == ["?? soda.toml", "?? specs/"]
    assert git(repo, "check-ignore", "state/soda.db") == "state/soda.db"
    toml_before = (repo / "soda.toml").read_text()

    second = runner.invoke(app, ["-C", str(repo), "init"])
    assert second.exit_code == 0
    assert "nothing to do" in second.output
    assert (repo / "soda.toml").read_text() == toml_before
    exclude = (repo / ".git" / "info" / "exclude").read_text()
    assert exclude.count("/state/") == 1


def test_init_leaves_a_tracked_gitignore_alone(repo: Path) -> None:
    (repo / ".gitignore").write_text("*.log\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore logs")
    assert runner.invoke(app, ["-C", str(repo), "init"]).exit_code == 0
    assert (repo / ".gitignore").read_text() == "*.log\n"


def test_init_outside_git_says_so(tmp_path: Path) -> None:
    result = soda("init", cwd=tmp_path)
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        == f"soda: {tmp_path} is not inside a git repository (run `git init` there first)"
    )
    assert not (tmp_path / "soda.toml").exists()


def test_bad_config_exits_2_naming_the_key(repo: Path) -> None:
    runner.invoke(app, ["-C", str(repo), "init"])
    config = repo / "soda.toml"
    config.write_text(config.read_text().replace("max_iterations = 20", "max_iteratons = 20"))
    result = soda("history", cwd=repo)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "unknown key loop.max_iteratons" in lines[0]
    assert "Traceback" not in result.stderr


def test_schema_prints_a_contract() -> None:
    result = runner.invoke(app, ["schema", "plan"])
    assert result.exit_code == 0
    schema = json.loads(result.output)
    assert schema["title"] == "plan"
    assert "tasks" in schema["properties"]


def test_schema_unknown_name_exits_2() -> None:
    result = runner.invoke(app, ["schema", "nope"])
    assert result.exit_code == 2


def test_history_and_tasks_on_a_fresh_project(repo: Path) -> None:
    runner.invoke(app, ["-C", str(repo), "init"])
    history = runner.invoke(app, ["-C", str(repo), "history"])
    assert history.exit_code == 0
    assert "no iterations yet" in history.output
    tasks = runner.invoke(app, ["-C", str(repo), "tasks"])
    assert tasks.exit_code == 0
    assert "no tasks yet" in tasks.output


def test_tasks_prints_a_tree(repo: Path) -> None:
    from soda.trace import SqliteTracker

    runner.invoke(app, ["-C", str(repo), "init"])
    tracker = SqliteTracker(open_db(repo / "state" / "soda.db"), "spec")
    root = tracker.create("Spec for repo")
    tracker.create("Write the parser", parent_id=root.id)
    result = runner.invoke(app, ["-C", str(repo), "tasks"])
    assert result.exit_code == 0
    assert "Spec for repo" in result.output
    assert "Write the parser" in result.output


def test_every_command_help_has_an_example() -> None:
    import typer.main

    command = typer.main.get_command(app)
    for name in command.list_commands(None):  # type: ignore[arg-type]
        sub = command.get_command(None, name)  # type: ignore[arg-type]
        assert sub is not None and "Example:" in (sub.help or ""), name
