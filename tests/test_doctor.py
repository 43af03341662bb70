"""`soda doctor`: one line per check, failures named, a ping through the fake API."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from soda.cli import app
from soda.demo import prepare
from soda.doctor import run_checks
from tests.fakeapi import FakeAPI, json_response

pytest_plugins = ("tests.fakeapi",)
runner = CliRunner()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    prepare(root)
    return root


def test_all_pass_on_a_ready_project(project: Path) -> None:
    result = runner.invoke(app, ["-C", str(project), "doctor"])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert [line.split()[:2] for line in lines] == [
        ["pass", "config"],
        ["pass", "git"],
        ["pass", "tests"],
        ["pass", "state"],
        ["pass", "provider"],
    ]


def test_failures_are_named_and_exit_1(project: Path) -> None:
    config = project / "soda.toml"
    text = config.read_text()
    text = text.replace('provider = "scripted"', 'provider = "anthropic"')
    text = text.replace('base_branch = "main"', 'base_branch = "trunk"')
    text = text.replace("test_command = ", 'test_command = "no-such-runner -q" #')
    config.write_text(text)
    checks = {c.name: c for c in run_checks(project)}
    assert checks["config"].ok
    assert not checks["git"].ok and "'trunk' does not exist" in checks["git"].detail
    assert not checks["tests"].ok and "no-such-runner" in checks["tests"].detail
    assert not checks["provider"].ok and "ANTHROPIC_API_KEY" in checks["provider"].detail
    result = runner.invoke(app, ["-C", str(project), "doctor"])
    assert result.exit_code == 1
    assert "FAIL  provider" in result.output


def test_bad_config_is_one_failed_line(project: Path) -> None:
    (project / "soda.toml").write_text("[loop]\nmax_iteratons = 3\n")
    (check,) = run_checks(project)
    assert not check.ok and "unknown key loop.max_iteratons" in check.detail


def test_ping_sends_one_tiny_request(
    project: Path, fake_api: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-real")
    config = project / "soda.toml"
    text = config.read_text().replace('provider = "scripted"', 'provider = "anthropic"')
    text = text.replace("# base_url = (not set)", f'base_url = "{fake_api.url}"')
    text = text.replace('fast = "scripted"', 'fast = "claude-haiku-4-5"')
    config.write_text(text)
    fake_api.enqueue(json_response({"ok": True}))
    checks = {c.name: c for c in run_checks(project, ping=True)}
    assert checks["provider"].ok, checks["provider"].detail
    assert "answered" in checks["provider"].detail
    assert len(fake_api.requests) == 1
    assert fake_api.requests[0].body["model"] == "claude-haiku-4-5"
    assert fake_api.requests[0].body["output_config"]["format"]["type"] == "json_schema"
