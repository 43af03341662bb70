"""`soda tools` and `soda doctor`'s executor check: the pinned CLIs, where they
are, a wrong version or a missing key named in one line, a bad backend refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from soda.agent.backends.pins import installed_binary
from soda.agent.executors import PINS
from soda.cli.doctor import run_checks
from soda.cli.main import app
from tests.cli_executors import KEY_ENV, require_cli
from tests.test_doctor import project  # noqa: F401 - the fixture

runner = CliRunner()


def configure(root: Path, lines: str) -> None:
    config = root / "soda.toml"
    text = config.read_text()
    start = text.index("\n[executor]\n")
    end = text.find("\n[", start + 1)
    config.write_text(text[:start] + "\n[executor]\n" + lines + (text[end:] if end > 0 else ""))


def test_tools_lists_the_pinned_versions_and_where_they_are() -> None:
    for name in PINS:
        require_cli(name)
    result = runner.invoke(app, ["tools"])
    assert result.exit_code == 0, result.output
    for name, pin in PINS.items():
        assert f"{name}: {pin.package} {pin.version}: {installed_binary(pin)}" in result.output


def test_tools_install_is_idempotent_and_refuses_an_unknown_tool() -> None:
    require_cli("codex")
    again = runner.invoke(app, ["tools", "install", "codex"])
    assert again.exit_code == 0 and "already installed" in again.output
    bad = runner.invoke(app, ["tools", "install", "aider"])
    assert bad.exit_code == 2
    assert bad.output.strip().splitlines() == [
        "soda: soda tools install: unknown tool 'aider' (known: claude-code, codex)"
    ]


def test_doctor_checks_the_cli_and_its_key(
    project: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    require_cli("claude-code")
    configure(project, f'backend = "claude-code"\napi_key_env = "{KEY_ENV}"\n')
    monkeypatch.setenv(KEY_ENV, "sk-test")
    checks = {c.name: c for c in run_checks(project)}
    assert checks["executor"].ok, checks["executor"].detail
    assert "@anthropic-ai/claude-code 2.1.330" in checks["executor"].detail
    monkeypatch.delenv(KEY_ENV)
    checks = {c.name: c for c in run_checks(project)}
    assert not checks["executor"].ok and KEY_ENV in checks["executor"].detail
    old = tmp_path / "claude"
    old.write_text("#!/bin/sh\necho '1.0.0 (Claude Code)'\n")
    old.chmod(0o755)
    monkeypatch.setenv(KEY_ENV, "sk-test")
    configure(project, f'backend = "claude-code"\napi_key_env = "{KEY_ENV}"\ncommand = "{old}"\n')
    (check,) = [c for c in run_checks(project) if c.name == "executor"]
    assert not check.ok
    assert "reports version 1.0.0; soda supports @anthropic-ai/claude-code 2.1.330" in check.detail
    configure(project, 'backend = "claude-code"\ncommand = "/no/such/claude"\n')
    (check,) = [c for c in run_checks(project) if c.name == "executor"]
    assert not check.ok and "'/no/such/claude': no such executable" in check.detail


def test_an_unknown_backend_is_a_config_error(project: Path) -> None:  # noqa: F811
    configure(project, 'backend = "aider"\n')
    result = runner.invoke(app, ["-C", str(project), "status"])
    assert result.exit_code == 2
    assert "executor.backend" in result.output and "aider" not in result.output.split(":")[0]
