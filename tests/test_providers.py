"""The provider registry (`soda.llm.providers`) is the one list of providers: an
unknown `[model] provider` is a config error naming the key and the known names
(exit 2 for a command, a FAIL config line for doctor, a refused daemon start or
reload), and doctor's provider check comes from the registry's entry. Real
projects in temp dirs, the CLI through typer's runner and real subprocesses."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from soda.cli.demo import prepare
from soda.cli.doctor import run_checks
from soda.cli.main import app
from soda.config import ModelConfig, load
from soda.daemon.process import Daemon
from soda.errors import ConfigError
from soda.events import Events
from soda.llm import make_model
from soda.llm.providers import PROVIDERS, provider_for
from soda.store import open_db
from tests.conftest import soda

runner = CliRunner()
KNOWN = "(known: anthropic, openai, scripted)"


def project(tmp_path: Path, provider: str) -> Path:
    """The demo project (scripted provider) with `[model] provider` set to `provider`."""
    root = tmp_path / "project"
    config = prepare(root)
    config.write_text(with_provider(config.read_text(), provider))
    return root


def with_provider(text: str, provider: str, more: str = "") -> str:
    """soda.toml's text with its `provider = ...` line (and `more` lines after it)."""
    line = '\nprovider = "scripted"\n'
    assert text.count(line) == 1
    return text.replace(line, f'\nprovider = "{provider}"\n{more}')


def refusal(output: str) -> list[str]:
    """The lines soda printed about the provider."""
    return [line for line in output.splitlines() if "model.provider" in line]


@pytest.mark.parametrize("command", [["run", "--once"], ["status"], ["tell", "use argparse"]])
def test_a_command_refuses_an_unknown_provider_with_one_line_and_exit_2(
    tmp_path: Path, command: list[str]
) -> None:
    root = project(tmp_path, "gemini")
    result = runner.invoke(app, ["-C", str(root), *command])
    assert result.exit_code == 2, result.output
    assert refusal(result.output) == [
        f"soda: soda.toml: model.provider: unknown provider 'gemini' {KNOWN}"
    ]


def test_start_refuses_an_unknown_provider(tmp_path: Path) -> None:
    root = project(tmp_path, "gemini")
    done = soda("start", cwd=root)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"soda: soda.toml: model.provider: unknown provider 'gemini' {KNOWN}"
    ]
    assert not (root / "state" / "soda.pid").exists()


def test_the_daemon_refuses_an_unknown_provider_at_start_and_on_reload(tmp_path: Path) -> None:
    root = project(tmp_path, "gemini")
    with pytest.raises(ConfigError, match=r"model\.provider: unknown provider 'gemini'"):
        Daemon(root / "soda.toml")
    ran = soda("daemon-run", cwd=root)
    assert ran.returncode == 2 and "model.provider" in ran.stderr


def test_doctor_reports_an_unknown_provider_as_a_config_failure(tmp_path: Path) -> None:
    root = project(tmp_path, "gemini")
    [check] = run_checks(root)
    assert (check.name, check.ok) == ("config", False)
    assert check.detail == f"soda.toml: model.provider: unknown provider 'gemini' {KNOWN}"
    result = runner.invoke(app, ["-C", str(root), "doctor"])
    assert result.exit_code == 1
    assert result.output.splitlines() == [f"FAIL  config    {check.detail}"]


def test_make_model_looks_the_name_up(tmp_path: Path) -> None:
    root = project(tmp_path, "scripted")
    config = load(root / "soda.toml")
    events = Events(open_db(tmp_path / "soda.db"))
    assert make_model(config, events.emit).provider == "scripted"
    # A name the config file cannot hold any more is still refused, never Anthropic.
    config.model.provider = "gemini"
    with pytest.raises(ConfigError) as refused:
        make_model(config, events.emit)
    assert refused.value.problems == [
        f"soda.toml: model.provider: unknown provider 'gemini' {KNOWN}"
    ]


def test_every_provider_is_documented_and_builds_the_model_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    described = ModelConfig.model_fields["provider"].description or ""
    root = project(tmp_path, "scripted")
    text = (root / "soda.toml").read_text()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")  # never sent: nothing is asked
    events = Events(open_db(tmp_path / "soda.db"))
    for name, provider in PROVIDERS.items():
        assert provider_for(name) is provider
        assert f'"{name}"' in described
        where = 'base_url = "http://127.0.0.1:9/v1"\n' if name == "openai" else ""
        (root / "soda.toml").write_text(with_provider(text, name, where))
        assert make_model(load(root / "soda.toml"), events.emit).provider == name


def test_doctors_provider_check_follows_the_registry(tmp_path: Path) -> None:
    """anthropic needs its key, openai (local servers) does not, scripted is offline."""
    root = project(tmp_path, "scripted")
    config = root / "soda.toml"
    text = config.read_text()

    def provider_check(name: str) -> str:
        config.write_text(with_provider(text, name))
        checks = {c.name: c for c in run_checks(root)}
        assert checks["config"].ok, checks["config"].detail
        check = checks["provider"]
        return f"{check.label} {check.detail}"

    assert provider_check("anthropic") == (
        "FAIL ANTHROPIC_API_KEY is not set; export your Anthropic API key"
    )
    assert provider_check("openai").startswith("pass openai (")
    assert provider_check("scripted").startswith("pass scripted model replaying ")
