"""The gate on a src-layout project whose tests import the package through an
editable install: the proof that the candidate commit's code is what the tests
ran, not the person's checkout the install points at.

The project is real (git, a venv, pip), and everything is offline:

- the build backend is a tiny stdlib-only PEP 517/660 backend inside the project
  (`_build/backend.py`). An editable wheel is what setuptools and hatchling make
  for a src layout: a `.pth` file naming `<project>/src`. (setuptools 65, what
  `venv` seeds on Python 3.11, needs the `wheel` package for PEP 660, which a
  fresh venv lacks; the tests must not download it.)
- the venv is made `--without-pip`; soda's own pip installs into it
  (`pip --python`), with `--no-build-isolation --no-index`.
- pytest: the venv's site-packages links to the pytest (and its dependencies)
  running these tests, so the project's venv imports it without installing
  anything. The links resolve inside the jail: soda binds its own environment.

Each case drives soda's own gate functions (Checkouts, tested, gate, Jail) on a
branch with two candidates: a good change (it adds a function and its test) and
a bad one on top of it (it breaks `add`). The person's checkout stays on main.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from soda.config import load
from soda.gate import tested as cached_test_run  # not a test
from soda.gate.rules import GateResult, gate
from soda.gate.runner import TestReport, report_kind
from soda.repo.checkouts import Checkouts
from soda.repo.git import open_repo
from soda.store import open_db
from soda.system.jail import Jail
from tests.conftest import git

BACKEND = '''\
"""A stdlib-only PEP 517/660 backend: enough for pip to install this project."""
import base64, hashlib, os, zipfile

NAME, VERSION = "mypkg", "0.1"
DIST = f"{NAME}-{VERSION}"


def _wheel(directory, files):
    info = f"{DIST}.dist-info"
    files = {
        **files,
        f"{info}/METADATA": f"Metadata-Version: 2.1\\nName: {NAME}\\nVersion: {VERSION}\\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\n"
        "Tag: py3-none-any\\n",
    }
    record = []
    for path, text in files.items():
        data = text.encode()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(data)}")
    files[f"{info}/RECORD"] = "\\n".join([*record, f"{info}/RECORD,,"]) + "\\n"
    name = f"{DIST}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(directory, name), "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return name


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, {f"_{NAME}.pth": os.path.join(os.getcwd(), "src") + "\\n"})


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = {}
    for folder, _, names in os.walk("src"):
        for name in names:
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as f:
                files[os.path.relpath(path, "src")] = f.read()
    return _wheel(wheel_directory, files)


def build_sdist(sdist_directory, config_settings=None):
    raise NotImplementedError("not needed by these tests")
'''

PYPROJECT = """\
[build-system]
requires = []
build-backend = "backend"
backend-path = ["_build"]

[project]
name = "mypkg"
version = "0.1"
"""

GOOD_ADD = "def add(a, b):\n    return a + b\n"
TEST_ADD = "from mypkg import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


@dataclass(frozen=True)
class Project:
    """The person's checkout on main, and a branch with two candidate commits."""

    root: Path
    base: str
    good: str
    """Adds `sub` and its test: the gate must let it through."""
    bad: str
    """On top of `good`, breaks `add`: the gate must refuse it."""


def commit(root: Path, files: dict[str, str], message: str) -> str:
    """Write `files`, commit them, return the new commit's id."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git(root, "add", *files)
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD")


def make_project(root: Path) -> Project:
    """main: `add` and its test; branch work: the good candidate, then the bad one."""
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    base = commit(
        root,
        {
            ".gitignore": ".venv/\nstate/\nsoda.toml\n",
            "pyproject.toml": PYPROJECT,
            "_build/backend.py": BACKEND,
            "src/mypkg/__init__.py": GOOD_ADD,
            "tests/test_mypkg.py": TEST_ADD,
            "specs/SPEC.md": "# mypkg\n",
        },
        "mypkg: add",
    )
    git(root, "checkout", "-q", "-b", "work")
    good = commit(
        root,
        {
            "src/mypkg/__init__.py": GOOD_ADD + "\n\ndef sub(a, b):\n    return a - b\n",
            "tests/test_sub.py": "from mypkg import sub\n\n\ndef test_sub():\n"
            "    assert sub(5, 3) == 2\n",
        },
        "mypkg: sub",
    )
    bad = commit(
        root,
        {
            "src/mypkg/__init__.py": "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n"
            "    return a - b\n"
        },
        "mypkg: break add",
    )
    git(root, "checkout", "-q", "main")
    return Project(Path(os.path.realpath(root)), base, good, bad)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return make_project(tmp_path / "repo")


PYTEST_PACKAGES = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "pygments", "py")
"""pytest and what it imports: linked into each project venv from ours."""


def make_venv(path: Path) -> Path:
    """A venv without pip that imports the pytest running these tests, offline:
    its site-packages gets a symlink to each of pytest's packages here (a `.pth`
    naming our whole site-packages works too, but then pytest loads every plugin
    installed beside soda, a second per run)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = path / "lib" / version / "site-packages"
    for name in PYTEST_PACKAGES:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None, name
        origin = Path(spec.origin)
        source = origin.parent if spec.submodule_search_locations else origin
        (site / source.name).symlink_to(source)
    return path / "bin" / "python"


def install_editable(python: Path, source: Path) -> None:
    """`pip install -e source` into the venv of `python`, offline, ignoring pip's
    configuration on this machine."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
    subprocess.run(
        [*pip, "--no-build-isolation", "--no-deps", "--no-index", "-e", str(source)],
        check=True,
        env=env,
        capture_output=True,
    )


@dataclass(frozen=True)
class Verdicts:
    """The three test runs and the gate's word on each candidate."""

    baseline: TestReport
    good: TestReport
    bad: TestReport
    good_gate: GateResult
    bad_gate: GateResult


def judge(project: Project, python: Path, sandbox: str = "") -> Verdicts:
    """Write soda.toml with `python -m pytest` as the test command and run the
    gate on both candidates, as ACT does: each on a clean pooled checkout."""
    (project.root / "soda.toml").write_text(
        f'[project]\ntest_command = "{python} -m pytest -q"\n\n'
        f"[act]\ncommand_timeout = 120.0\n\n[sandbox]\n{sandbox}\n"
    )
    config = load(project.root / "soda.toml")
    repo = open_repo(project.root)
    jail = Jail.for_config(config, Path(repo.git_dir))
    db = open_db(config.db_path)
    checkouts = Checkouts(repo, config.state_dir / "worktrees")
    mandatory = report_kind(config) != "exit-code"
    assert mandatory

    def run(commit: str) -> TestReport:
        return cached_test_run(config, jail, db, checkouts, commit)[0]

    baseline, good, bad = run(project.base), run(project.good), run(project.bad)
    return Verdicts(
        baseline,
        good,
        bad,
        gate(baseline, good, mandatory=mandatory),
        gate(baseline, bad, mandatory=mandatory),
    )


def assert_the_candidates_code_ran(project: Project, verdicts: Verdicts) -> None:
    """The good change merges, the bad one is refused naming the broken test."""
    # The person's checkout is on main, where add is right and sub does not
    # exist: only the candidate's own code makes test_sub pass and test_add fail.
    assert "def sub" not in (project.root / "src" / "mypkg" / "__init__.py").read_text()
    for report in (verdicts.baseline, verdicts.good, verdicts.bad):
        assert report.detailed and report.foreign_imports == (), report.output
    assert verdicts.baseline.passed == {"tests.test_mypkg::test_add"}
    assert verdicts.good.passed == {"tests.test_mypkg::test_add", "tests.test_sub::test_sub"}
    assert verdicts.good_gate.ok, verdicts.good_gate.reason
    assert verdicts.bad.failed == {"tests.test_mypkg::test_add"}
    assert not verdicts.bad_gate.ok
    assert "tests.test_mypkg::test_add" in verdicts.bad_gate.reason
    assert verdicts.bad_gate.regressions == ("tests.test_mypkg::test_add",)


def test_venv_inside_the_repository(project: Project) -> None:
    """Case A: `<repo>/.venv` (ignored), editable from the person's checkout. In
    the jail the checkout's path is the candidate's worktree, so the `.pth`
    naming `<repo>/src` resolves to the candidate's code."""
    python = make_venv(project.root / ".venv")
    install_editable(python, project.root)
    assert_the_candidates_code_ran(project, judge(project, python))


def test_venv_outside_the_repository_needs_no_expose(project: Project, tmp_path: Path) -> None:
    """Case B: the venv under the (in the jail private) /tmp; soda binds the test
    command's venv by itself, no sandbox.expose needed."""
    python = make_venv(tmp_path / "venvs" / "proj")
    install_editable(python, project.root)
    assert_the_candidates_code_ran(project, judge(project, python))


def test_without_the_jail_the_editable_install_is_caught_as_foreign(project: Project) -> None:
    """Control for case A: unconfined, the tests run in state/worktrees/view but
    the install points at the person's checkout, so they test main's code. The
    import probe notices and the gate refuses, naming the module."""
    python = make_venv(project.root / ".venv")
    install_editable(python, project.root)
    verdicts = judge(project, python, 'mode = "none"')
    assert any(f.startswith("mypkg from ") for f in verdicts.baseline.foreign_imports)
    for result in (verdicts.good_gate, verdicts.bad_gate):
        assert not result.ok
        assert "did not run the checkout's code" in result.reason and "mypkg" in result.reason


def test_installed_from_another_clone_is_refused(project: Project, tmp_path: Path) -> None:
    """Case C: the package comes from a second clone outside the repository
    (bound into the jail with sandbox.expose, so the import succeeds there): the
    tests never see the candidate's code, and the gate says so."""
    other = tmp_path / "other-clone"
    git(tmp_path, "clone", "-q", str(project.root), str(other))
    python = make_venv(tmp_path / "venvs" / "other")
    install_editable(python, other)
    verdicts = judge(project, python, f'expose = ["{other}"]')
    where = f"mypkg from {os.path.realpath(other)}/src/mypkg/__init__.py"
    for report in (verdicts.baseline, verdicts.good, verdicts.bad):
        assert where in report.foreign_imports, report.foreign_imports
    # The foreign copy is main's code: it has no `sub`, so tests/test_sub.py
    # fails to import in both candidates, and the bad `add` is never exercised.
    assert verdicts.good.failed == verdicts.bad.failed == {"::tests.test_sub"}
    for result in (verdicts.good_gate, verdicts.bad_gate):
        assert not result.ok
        assert "did not run the checkout's code" in result.reason and where in result.reason


def test_a_package_the_jail_cannot_import_does_not_let_a_bad_change_through(
    project: Project, tmp_path: Path
) -> None:
    """Case C without sandbox.expose: the clone is under /tmp, private in the jail."""
    other = tmp_path / "other-clone"
    git(tmp_path, "clone", "-q", str(project.root), str(other))
    python = make_venv(tmp_path / "venvs" / "other")
    install_editable(python, other)
    verdicts = judge(project, python)
    assert verdicts.good.passed == frozenset()  # nothing imported mypkg
    assert any("cannot import" in item for item in verdicts.good.foreign_imports)
    # The bad commit judged against the good one, its parent, as the next
    # iteration's gate would.
    assert not gate(verdicts.good, verdicts.bad, mandatory=True).ok


def test_fixing_the_install_as_told_lets_the_good_change_through(
    project: Project, tmp_path: Path
) -> None:
    other = tmp_path / "other-clone"
    git(tmp_path, "clone", "-q", str(project.root), str(other))
    python = make_venv(tmp_path / "venvs" / "proj")
    install_editable(python, other)
    sandbox = f'expose = ["{other}"]'
    assert not judge(project, python, sandbox).good_gate.ok  # case C: refused
    install_editable(python, project.root)  # "pip install -e ." from the repository
    assert judge(project, python, sandbox).good_gate.ok
