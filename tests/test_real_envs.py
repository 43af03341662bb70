"""soda on real repositories: `soda init` writes the test command that uses the
repository's own environment (a `.venv`, npm, Go, cargo), the jail runs what it
wrote, and a test run that cannot import the project says which module, the
command it ran and the fix, in the HALT and in `soda doctor --tests`.

Everything is real: git repositories, venvs (`python -m venv`, made once per
module and copied), the jail, `soda` in subprocesses; the only fake is the
model (the shipped demo script's ORIENT answers). Offline: the venvs link to the
pytest running these tests (tests.test_editable.make_venv), and "installing the
project" is pip's editable install from the repository itself.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from soda.cli.demo import SCRIPT_PATH
from soda.cli.init import init_project
from soda.config import load
from soda.system.jail import Jail
from tests.conftest import git, soda
from tests.test_daemon import DEMO, query
from tests.test_editable import install_editable, make_project, make_venv

VENV_COMMAND = ".venv/bin/python -m pytest -q"


@pytest.fixture(scope="module")
def venvs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two venvs made once: one whose python imports pytest, one bare."""
    where = tmp_path_factory.mktemp("venvs")
    bare = where / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    make_venv(where / "with-pytest")
    return {"with-pytest": where / "with-pytest", "bare": bare}


def with_venv(root: Path, template: Path) -> Path:
    """`root/.venv`, a copy of `template` (its links stay absolute); its python."""
    shutil.copytree(template, root / ".venv", symlinks=True)
    return root / ".venv" / "bin" / "python"


def written(root: Path) -> str:
    data = tomllib.loads((root / "soda.toml").read_text())
    return str(data["project"]["test_command"])


def new_repo(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "--allow-empty", "-m", "initial")
    return root


# --- soda init: the command that uses the repository's environment -----------------


def test_init_with_a_venv_writes_its_pytest_and_the_jail_runs_it(
    tmp_path: Path, venvs: dict[str, Path]
) -> None:
    project = make_project(tmp_path / "repo")
    root = project.root
    git(root, "checkout", "-q", "main")
    # A test that passes only under the venv's own interpreter, at the repository's path.
    (root / "tests" / "test_env.py").write_text(
        "import os, sys\n\n\ndef test_runs_in_the_venv():\n"
        "    assert sys.prefix == os.path.join(os.getcwd(), '.venv')\n"
    )
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "env test")
    install_editable(with_venv(root, venvs["with-pytest"]), root)
    (root / "tox.ini").write_text("[tox]\n")  # untracked: seen by init all the same

    result = soda("init", cwd=root)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert f"test_command = '{VENV_COMMAND}' (found .venv/)" in lines
    assert any(line.startswith("  tox.ini found: tox builds its environments") for line in lines)
    assert written(root) == VENV_COMMAND
    text = (root / "soda.toml").read_text()
    assert "# soda init chose this: found .venv/." in text
    assert f"# One test: {VENV_COMMAND} tests/test_x.py::test_name" in text
    assert load(root / "soda.toml").project.test_command == VENV_COMMAND

    # The jail runs it: the venv's python, the checkout's code, per-test results.
    doctor = soda("doctor", "--tests", cwd=root)
    checks = {line.split()[1]: line for line in doctor.stdout.splitlines()}
    assert checks["tests"].startswith("pass"), checks["tests"]
    assert checks["imports"].startswith("pass  imports   2 passed, 0 failed"), checks["imports"]
    assert "no project module (mypkg) came from elsewhere" in checks["imports"]


def test_init_on_a_venv_without_pytest_says_how_to_install_it(
    tmp_path: Path, venvs: dict[str, Path]
) -> None:
    root = new_repo(tmp_path / "repo", {".gitignore": ".venv/\n"})
    with_venv(root, venvs["bare"])
    result = soda("init", cwd=root)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    at = lines.index(f"test_command = '{VENV_COMMAND}' (found .venv/)")
    assert (
        lines[at + 1]
        == "  pytest is not installed in .venv/: .venv/bin/python -m pip install pytest"
    )
    # ... and a run would say so too, in the jail, with the same fix.
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "soda")
    imports = next(
        x for x in soda("doctor", "--tests", cwd=root).stdout.splitlines() if " imports " in x
    )
    assert imports.startswith(
        "FAIL  imports   pytest is not installed where the tests ran on main ("
    )
    assert f"they ran with `{VENV_COMMAND}` in soda's jail" in imports
    assert "Fix: install it into the environment that command uses" in imports
    assert "(.venv/bin/python -m pip install pytest)" in imports


@pytest.mark.parametrize(
    ("files", "command", "why"),
    [
        ({"venv/pyvenv.cfg": ""}, "python -m pytest -q", "nothing found"),  # no python in it
        ({"uv.lock": ""}, VENV_COMMAND, "found uv.lock"),
        (
            {"package.json": json.dumps({"scripts": {"test": "node -e 'process.exit(0)'"}})},
            "npm test",
            "found package.json with a test script",
        ),
        (  # npm init's placeholder is no test script
            {"package.json": json.dumps({"scripts": {"test": 'echo "Error: no test specified"'}})},
            "python -m pytest -q",
            "nothing found",
        ),
        ({"go.mod": "module example.com/x\n\ngo 1.21\n"}, "go test -json ./...", "found go.mod"),
        (
            {"Cargo.toml": '[package]\nname = "x"\n'},
            "cargo test --no-fail-fast",
            "found Cargo.toml",
        ),
        ({"pyproject.toml": "[project]\nname = 'x'\n"}, "python -m pytest -q", "nothing found"),
    ],
)
def test_init_writes_the_command_of_what_it_finds(
    tmp_path: Path, files: dict[str, str], command: str, why: str
) -> None:
    root = new_repo(tmp_path / "repo", files)
    report = init_project(root)
    assert report.test_command is not None
    assert (report.test_command.command, report.test_command.why.split(":")[0]) == (command, why)
    assert written(root) == command
    config = load(root / "soda.toml")  # what it wrote is a valid config
    for path in config.sandbox.expose:  # only what the hidden home holds
        assert Path(path).is_relative_to(Path.home().resolve()), path


def test_init_notes_uv_and_npm_steps_before_the_command_can_run(tmp_path: Path) -> None:
    uv = init_project(new_repo(tmp_path / "uv", {"uv.lock": ""})).test_command
    assert uv is not None and "run `uv sync` here to make it" in uv.advice[0]
    npm = init_project(
        new_repo(tmp_path / "npm", {"package.json": '{"scripts": {"test": "jest"}}'})
    ).test_command
    assert npm is not None and npm.advice == [
        "no node_modules/ yet: run `npm install` (the jail has no network).",
    ]
    assert npm.why == "found package.json whose test script runs jest"
    text = (tmp_path / "npm" / "soda.toml").read_text()
    assert "# One test: npm test -- test/x.test.js -t 'describe test'" in text
    assert "# Per-test results: soda adds jest's --json report to each run" in text
    other = init_project(
        new_repo(tmp_path / "other", {"package.json": '{"scripts": {"test": "tap"}}'})
    ).test_command
    assert other is not None and "the gate sees only the exit code (weak)" in other.advice[0]


def test_init_keeps_a_command_the_caller_or_an_existing_file_set(tmp_path: Path) -> None:
    root = new_repo(tmp_path / "repo", {"go.mod": "module x\n"})
    (root / "soda.toml").write_text('[project]\ntest_command = "make test"\n')
    report = init_project(root)
    assert report.test_command is None and written(root) == "make test"
    assert "test_command" not in soda("init", cwd=root).stdout


@pytest.mark.parametrize("runner", ["npm", "cargo"])
def test_the_jail_runs_the_written_toolchain_command(tmp_path: Path, runner: str) -> None:
    """What init wrote (the command, the toolchain it exposed) works in the jail,
    offline. The toolchains are part of the machine soda's tests run on (node and
    npm, cargo): a missing one fails here rather than passing by skipping."""
    assert shutil.which(runner) is not None, f"{runner} is not on PATH: install it to run the tests"
    files = {
        "npm": {"package.json": json.dumps({"scripts": {"test": "node -e 'console.log(6*7)'"}})},
        "cargo": {
            "Cargo.toml": '[package]\nname = "x"\nversion = "0.1.0"\nedition = "2021"\n',
            "src/lib.rs": "#[test]\nfn answer() { assert_eq!(6 * 7, 42); }\n",
            ".gitignore": "target/\n",
        },
    }[runner]
    root = new_repo(tmp_path / "repo", files)
    init_project(root)
    config = load(root / "soda.toml")
    jail = Jail.for_config(config)
    done = jail.run(config.project.test_command, root, timeout=300)
    assert done.ok, done.output[-2000:]
    assert ("42" if runner == "npm" else "test answer ... ok") in done.output


# --- a run that cannot import the project: which module, the command, the fix ------


def test_a_baseline_that_cannot_import_the_project_halts_naming_module_and_fix(
    tmp_path: Path, venvs: dict[str, Path]
) -> None:
    project = make_project(tmp_path / "repo")
    root = project.root
    # Like flask's: the conftest imports the project, so pytest dies before any test.
    (root / "tests" / "conftest.py").write_text("import mypkg\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "conftest")
    python = with_venv(root, venvs["with-pytest"])  # the project is not installed in it
    assert soda("init", cwd=root).returncode == 0
    script = {"responses": [DEMO[1], DEMO[3], DEMO[4]]}  # ORIENT's submits: a one-task plan
    (root / SCRIPT_PATH).write_text(json.dumps(script))
    config = (root / "soda.toml").read_text()
    for key, value in {"provider": "scripted", "strong": "scripted", "fast": "scripted"}.items():
        config = config.replace(f"\n{key} = ", f'\n{key} = "{value}" #', 1)
    config = config.replace("# script = (not set)", f'script = "{SCRIPT_PATH}"')
    (root / "soda.toml").write_text(config)

    run = soda("run", "--once", cwd=root)
    assert run.returncode == 4, run.stdout + run.stderr
    expected = (
        "the tests cannot import 'mypkg' (importing tests/conftest.py) on the milestone tip: "
        f"they ran with `{VENV_COMMAND}` in soda's jail; the jail hides your home and has no "
        "network, so only what that environment has (or [sandbox] expose binds) is there. "
        "Fix: install the project (and its test dependencies) into the environment that "
        "command uses (.venv/bin/python -m pip install -e .), or set project.test_command "
        "to a command whose environment has it; `soda doctor --tests` checks"
    )
    assert f"HALT: {expected}" in run.stdout.splitlines()
    assert query(root, "SELECT message FROM halts") == [(expected,)]
    assert query(root, "SELECT count(*) FROM test_results") == [(0,)]  # not evidence

    doctor = soda("doctor", "--tests", cwd=root)
    imports = next(x for x in doctor.stdout.splitlines() if " imports " in x)
    assert imports.startswith("FAIL  imports   the tests cannot import 'mypkg' (importing tests/")
    assert "they ran with `.venv/bin/python -m pytest -q` in soda's jail" in imports
    assert "(.venv/bin/python -m pip install -e .)" in imports

    install_editable(python, root)  # the fix, as the message says it
    doctor = soda("doctor", "--tests", cwd=root)
    imports = next(x for x in doctor.stdout.splitlines() if " imports " in x)
    assert imports.startswith("pass  imports   1 passed, 0 failed"), imports
