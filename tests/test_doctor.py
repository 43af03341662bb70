"""`soda doctor`: one line per check, failures named, a ping through the fake API,
the jail and the gate described, and (with --tests) where the tests' imports came from."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from soda.cli.doctor import run_checks
from soda.cli.main import app
from tests.conftest import git
from tests.fakeapi import FakeAPI, json_response
from tests.sample import sample_project
from tests.test_editable import install_editable, make_project, make_venv

pytest_plugins = ("tests.fakeapi",)
runner = CliRunner()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return sample_project(tmp_path)


def test_all_pass_on_a_ready_project(project: Path) -> None:
    result = runner.invoke(app, ["-C", str(project), "doctor"])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert [line.split()[:2] for line in lines] == [
        ["pass", "config"],
        ["pass", "git"],
        ["pass", "tests"],
        ["pass", "jail"],
        ["pass", "gate"],
        ["pass", "state"],
        ["pass", "provider"],
        ["pass", "executor"],
        ["pass", "prices"],
        ["pass", "fit"],
        ["pass", "forge"],
    ]
    assert lines[-1].endswith("off (forge.mode)")
    prices = next(line for line in lines if line.split()[1] == "prices")
    assert prices.endswith("model.strong scripted: free (local)")  # the demo replays


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


def test_jail_check_describes_the_jail(project: Path) -> None:
    checks = {c.name: c for c in run_checks(project)}
    assert checks["jail"].ok and not checks["jail"].warn
    assert checks["jail"].detail.startswith("bubblewrap jail (")
    assert "network off" in checks["jail"].detail
    config = project / "soda.toml"
    config.write_text(config.read_text().replace('mode = "bwrap"', 'mode = "none"'))
    result = runner.invoke(app, ["-C", str(project), "doctor"])
    assert result.exit_code == 0, result.output
    assert 'warn  jail      sandbox.mode = "none": agent commands and tests run unconfined' in (
        result.output
    )


def test_gate_check_names_the_report(project: Path) -> None:
    checks = {c.name: c for c in run_checks(project)}
    assert (checks["gate"].label, checks["gate"].detail) == (
        "pass",
        "per-test (pytest JUnit, mandatory)",
    )
    config = project / "soda.toml"
    text = config.read_text().replace("# junit = (not set)", 'junit = "reports/junit.xml"')
    config.write_text(text)
    checks = {c.name: c for c in run_checks(project)}
    assert checks["gate"].detail == "per-test (JUnit at reports/junit.xml)"


def test_an_exit_code_only_gate_is_a_warning(project: Path) -> None:
    config = project / "soda.toml"
    text = config.read_text()
    config.write_text(text.replace("test_command = ", 'test_command = "make test" #', 1))
    checks = {c.name: c for c in run_checks(project)}
    gate = checks["gate"]
    assert gate.ok and gate.warn and gate.label == "warn"
    assert "exit code only" in gate.detail and "set gate.junit" in gate.detail
    lines = runner.invoke(app, ["-C", str(project), "doctor"]).output.splitlines()
    assert any(line.startswith("warn  gate      exit code only") for line in lines)


def test_imports_run_only_with_tests_flag_and_pass_on_the_checkouts_code(project: Path) -> None:
    assert "imports" not in {c.name for c in run_checks(project)}
    result = runner.invoke(app, ["-C", str(project), "doctor", "--tests"])
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if x.split()[1] == "imports")
    assert line.startswith("pass  imports   ")
    assert "on main (" in line and "no project module (calc) came from elsewhere" in line
    # The check's checkout is gone, and the pool a running soda uses was never touched.
    assert git(project, "worktree", "list").count("\n") == 0
    assert not (project / "state" / "worktrees").exists() or not any(
        (project / "state" / "worktrees").iterdir()
    )


def _editable_project(tmp_path: Path, source: str, sandbox: str = "") -> Path:
    """test_editable's src-layout project, its venv installed editable from
    `source` ("repo" itself or a clone "other"), and a soda.toml."""
    root = make_project(tmp_path / "repo").root
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(root), str(other))
    python = make_venv(tmp_path / "venvs" / "proj")
    install_editable(python, root if source == "repo" else other)
    (root / "soda.toml").write_text(
        f'[project]\ntest_command = "{python} -m pytest -q"\n\n[sandbox]\n{sandbox}\n'
    )
    return root


def test_imports_from_another_copy_fail_with_how_to_fix(tmp_path: Path) -> None:
    root = _editable_project(tmp_path, "other", f'expose = ["{tmp_path / "other"}"]')
    checks = {c.name: c for c in run_checks(root, tests=True)}
    imports = checks["imports"]
    assert not imports.ok
    assert f"mypkg from {tmp_path / 'other'}/src/mypkg/__init__.py" in imports.detail
    assert "gate will refuse every change" in imports.detail
    assert "pip install -e ." in imports.detail
    assert "\n" not in imports.detail
    result = runner.invoke(app, ["-C", str(root), "doctor", "--tests"])
    assert result.exit_code == 1 and "FAIL  imports   the tests on main (" in result.output


def test_imports_from_the_repository_pass(tmp_path: Path) -> None:
    checks = {c.name: c for c in run_checks(_editable_project(tmp_path, "repo"), tests=True)}
    assert checks["imports"].label == "pass", checks["imports"].detail
    assert "1 passed, 0 failed" in checks["imports"].detail
    assert "no project module (mypkg) came from elsewhere" in checks["imports"].detail


def test_a_package_the_jail_cannot_import_fails_naming_it(tmp_path: Path) -> None:
    """Installed from a clone the jail does not bind: nothing imports mypkg and
    nothing passes (see test_editable). The doctor fails, naming the module."""
    checks = {c.name: c for c in run_checks(_editable_project(tmp_path, "other"), tests=True)}
    imports = checks["imports"]
    assert imports.label == "FAIL", imports.detail
    assert "mypkg (the tests cannot import it" in imports.detail
    assert "gate will refuse every change" in imports.detail
    assert "pip install -e ." in imports.detail


def test_no_passing_test_on_the_base_branch_is_a_warning(tmp_path: Path) -> None:
    root = _editable_project(tmp_path, "repo")
    (root / "src" / "mypkg" / "__init__.py").write_text("def add(a, b):\n    return 0\n")
    git(root, "commit", "-q", "-am", "break add on main")
    imports = {c.name: c for c in run_checks(root, tests=True)}["imports"]
    assert imports.label == "warn", imports.detail
    assert "0 passed, 1 failed" in imports.detail
    assert "no test passes, so the gate cannot catch a regression" in imports.detail
    assert "first failure: tests.test_mypkg::test_add" in imports.detail
