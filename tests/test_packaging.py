"""The built wheel carries agents/ and schemas/ and works from any directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("soda_daemon-*.whl")
    return built


def test_wheel_contains_agents_and_schemas(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    for schema in (ROOT / "schemas").glob("*.json"):
        assert f"soda/_bundled/schemas/{schema.name}" in names
    for agent in (ROOT / "agents").rglob("*"):
        if agent.is_file() and "__pycache__" not in agent.parts:
            assert f"soda/_bundled/agents/{agent.relative_to(ROOT / 'agents')}" in names


def test_distribution_is_soda_daemon_and_pytest_only_an_extra(wheel: Path) -> None:
    """`soda` on the package index is another project: the distribution is
    soda-daemon (the command stays `soda`), and pytest is needed only by the demo."""
    archive = zipfile.ZipFile(wheel)
    (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
    headers = archive.read(metadata).decode().split("\n\n", 1)[0].splitlines()
    assert "Name: soda-daemon" in headers
    requires = [
        h.removeprefix("Requires-Dist: ") for h in headers if h.startswith("Requires-Dist:")
    ]
    pytest_requires = [r for r in requires if r.startswith("pytest")]
    assert pytest_requires and all("extra ==" in r for r in pytest_requires), requires
    (entry_points,) = [n for n in archive.namelist() if n.endswith("entry_points.txt")]
    assert "soda = soda.cli.entry:main" in archive.read(entry_points).decode()


@pytest.mark.slow
def test_installed_wheel_runs_from_an_unrelated_directory(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target)}

    def soda(*args: str, cwd: Path = elsewhere) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(target / "bin" / "soda"), *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "import soda.config.resources as r; print(r.resource_dir('schemas'))",
        ],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert where == str(target / "soda" / "_bundled" / "schemas")

    assert soda("--version").stdout.startswith("soda ")
    plan = json.loads(soda("schema", "plan").stdout)
    assert plan["$schema"].endswith("2020-12/schema")

    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    first = soda("init", cwd=project)
    assert first.returncode == 0, first.stderr
    assert {"soda.toml", "specs", "state"} <= {p.name for p in project.iterdir()}
    second = soda("init", cwd=project)
    assert "nothing to do" in second.stdout


def test_wheel_carries_the_dashboards_templates_and_assets_and_its_extra(wheel: Path) -> None:
    """`soda web` works from an installed wheel: its templates and static files
    ship inside the package, and its libraries are the `[web]` extra only."""
    archive = zipfile.ZipFile(wheel)
    names = archive.namelist()
    web = ROOT / "soda" / "web"
    for kind in ("templates", "static"):
        for path in (web / kind).iterdir():
            assert f"soda/web/{kind}/{path.name}" in names
    (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
    requires = [
        line.removeprefix("Requires-Dist: ")
        for line in archive.read(metadata).decode().split("\n\n", 1)[0].splitlines()
        if line.startswith("Requires-Dist:")
    ]
    for library in ("starlette", "jinja2", "uvicorn"):
        found = [r for r in requires if r.startswith(library)]
        assert found and all("extra ==" in r for r in found), requires
        assert any(r.replace('"', "'").endswith("extra == 'web'") for r in found), requires
