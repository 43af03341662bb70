"""What `soda init` writes as the test command: the repository's own environment.

soda runs the tests in its jail, where the home is hidden and the network is off.
A bare `python -m pytest` there runs whatever Python is first on PATH, which is
rarely the one the project is installed in, so the gate would test nothing of
the checkout (or nothing at all). `detect_test_command` looks at the repository
and picks the command that uses its environment, in this order:

    .venv/ or venv/ with a python   `.venv/bin/python -m pytest -q` (uv makes .venv too)
    uv.lock (no venv yet)           the same, once `uv sync` made .venv: `uv run`
                                    cannot work in the jail (no network, uv's cache
                                    and Pythons live under the hidden home)
    package.json with a test script `npm test` (vitest, jest, mocha, node --test:
                                    soda reads the runner's own report)
    go.mod                          `go test -json ./...` (test2json events)
    Cargo.toml                      `cargo test --no-fail-fast` (libtest's output;
                                    without the flag cargo stops at the first
                                    failing test target); with .config/nextest.toml
                                    `cargo nextest run --no-fail-fast` (nextest's
                                    JUnit report, through a config file of soda's)
    nothing                         `python -m pytest -q` (the default)

For each of these soda reads per-test results from the runner's own output
(`soda.gate.runners`), so the gate names the tests a change breaks; the note
written into soda.toml says which report and how one test is selected.

tox.ini and noxfile.py are noted, never used: they build their environments
from the network. Toolchain directories under the home that the command needs
(a node, Go or Rust installation, a Go or cargo dependency cache) are added to
`[sandbox] expose`, read-only; never a directory that holds credentials.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from soda.gate import runners

DEFAULT_COMMAND = "python -m pytest -q"

VENV_NAMES = (".venv", "venv")


@dataclass
class Detected:
    """The test command for a repository, why it was chosen, and what it needs."""

    command: str
    why: str
    """Printed in parentheses after the command, e.g. "found .venv/"."""
    advice: list[str] = field(default_factory=list)
    """What the person should do or know (a missing pytest, tox not used): printed
    by `soda init` and written as comments into soda.toml."""
    notes: list[str] = field(default_factory=list)
    """More comments for soda.toml: how to select one test, what the gate sees."""
    expose: list[str] = field(default_factory=list)
    """Absolute paths under the home the command needs inside the jail."""
    bind: str | None = None
    """The environment directory that must be in `[sandbox] bind_ignored`."""


def detect_test_command(root: Path) -> Detected:
    """The test command that uses `root`'s own environment (see the module doc)."""
    venv = next((name for name in VENV_NAMES if _is_venv(root / name)), None)
    markers = [name for name, _ in _RUNNERS if _has_runner(root, name)]
    if venv is not None:
        found = _python(root, venv, f"found {venv}/")
    elif (root / "uv.lock").is_file():
        found = _python(root, ".venv", "found uv.lock")
        found.advice.append(
            "there is no .venv yet: run `uv sync` here to make it. `uv run` does not work "
            "in the jail: it needs the network or uv's cache and Pythons under your home, "
            "which the jail hides.",
        )
    elif markers:
        found = {"package.json": _node, "go.mod": _go, "Cargo.toml": _cargo}[markers[0]](root)
        markers = markers[1:]
    else:
        found = Detected(
            DEFAULT_COMMAND,
            "nothing found: no .venv/, venv/, uv.lock, package.json, go.mod or Cargo.toml",
            advice=[
                "`python` is whatever Python comes first on PATH in the jail, without your "
                "home. Better: make a virtualenv here and install the project into it "
                "(python -m venv .venv && .venv/bin/python -m pip install -e . pytest), "
                'then set test_command = ".venv/bin/python -m pytest -q".'
            ],
        )
    for name in ("tox.ini", "noxfile.py"):
        if (root / name).is_file():
            found.advice.append(
                f"{name} found: {name.split('.')[0].removesuffix('file')} builds its "
                "environments from the network, which the jail does not have; soda runs "
                "the tests directly instead."
            )
    commands = dict(_RUNNERS)
    found.advice += [
        f"{name} found too: to gate on both, chain the commands (... && {commands[name]})."
        for name in markers
    ]
    return found


_RUNNERS = (
    ("package.json", "npm test"),
    ("go.mod", "go test -json ./..."),
    ("Cargo.toml", "cargo test --no-fail-fast"),
)
"""Other runners by the file that marks them, in the order they are preferred."""


def _has_runner(root: Path, marker: str) -> bool:
    if marker == "package.json":
        return _npm_test(root)
    return (root / marker).is_file()


def _is_venv(path: Path) -> bool:
    return (path / "pyvenv.cfg").is_file() and (path / "bin" / "python").exists()


def _python(root: Path, venv: str, why: str) -> Detected:
    python = f"{venv}/bin/python"
    command = f"{python} -m pytest -q"
    found = Detected(
        command,
        why,
        notes=[
            f"{venv}/ is bound read-only into the jail at the repository's path "
            "([sandbox] bind_ignored) and its base Python is exposed, so the tests import "
            f"the worktree's code when the project is installed there editable "
            f"({python} -m pip install -e .).",
            f"One test: {command} tests/test_x.py::test_name",
        ],
        bind=venv,
    )
    if _is_venv(root / venv) and not _has_module(root / python, "pytest"):
        found.advice.append(f"pytest is not installed in {venv}/: {python} -m pip install pytest")
    return found


def _has_module(python: Path, module: str) -> bool:
    """Whether `python` can import `module` (isolated: not from the current directory)."""
    try:
        done = subprocess.run(
            [str(python), "-I", "-c", f"import {module}"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _npm_test(root: Path) -> bool:
    """package.json has a real `test` script (not npm init's "no test specified")."""
    try:
        data = json.loads((root / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    scripts = data.get("scripts") if isinstance(data, dict) else None
    test = scripts.get("test") if isinstance(scripts, dict) else None
    return isinstance(test, str) and bool(test.strip()) and "no test specified" not in test


_WEAK_GATE = (
    "the test script runs none of vitest, jest, mocha or node --test, the runners whose "
    "report soda reads: the gate sees only the exit code (weak) unless [gate] junit names "
    "the JUnit XML report the runner writes."
)

_SELECTORS = {
    "vitest": "npm test -- test/x.test.ts -t 'describe test'",
    "jest": "npm test -- test/x.test.js -t 'describe test'",
    "mocha": "npm test -- test/x.js --grep 'test'",
    "node": "node --test --test-name-pattern='test' test/x.test.js",
}


def _node(root: Path) -> Detected:
    script = runners.package_test_script(root) or ""
    kind = runners.kind_of(script, root)
    if kind in _SELECTORS:
        assert kind is not None
        found = Detected(
            "npm test",
            f"found package.json whose test script runs {kind}",
            notes=[
                f"Per-test results: soda adds {runners.LABELS[kind]} to each run, written "
                "outside the checkout, and reads it.",
                f"One test: {_SELECTORS[kind]}",
            ],
        )
    else:
        found = Detected(
            "npm test",
            "found package.json with a test script",
            [_WEAK_GATE],
            notes=["One test: npm test -- <pattern> (what follows -- goes to the test runner)."],
        )
    if not (root / "node_modules").is_dir():
        found.advice.append("no node_modules/ yet: run `npm install` (the jail has no network).")
    # An nvm-style node: its bin and lib, not its etc/npmrc (which may hold a token).
    found.expose += _prefix_under_home("node", ("bin", "lib"))
    return found


def _go(root: Path) -> Detected:
    found = Detected(
        "go test -json ./...",
        "found go.mod",
        notes=[
            f"Per-test results: soda reads {runners.LABELS['go']} (ids: package/TestName, "
            "subtests package/TestName/sub).",
            "One test: go test -json ./pkg -run '^TestName$'",
            "The jail has no network: modules come from the module cache (exposed read-only).",
        ],
    )
    found.expose += _prefix_under_home("go")
    gopath = os.environ.get("GOPATH") or str(Path.home() / "go")
    cache = os.environ.get("GOMODCACHE") or str(Path(gopath) / "pkg" / "mod")
    found.expose += _under_home([Path(cache)])
    return found


def _cargo(root: Path) -> Detected:
    found = _nextest() if (root / ".config" / "nextest.toml").is_file() else _libtest()
    cargo_home = Path(os.environ.get("CARGO_HOME") or Path.home() / ".cargo")
    rustup_home = Path(os.environ.get("RUSTUP_HOME") or Path.home() / ".rustup")
    # Not the whole cargo home: credentials.toml (a registry token) lives there.
    found.expose += _under_home(
        [rustup_home, cargo_home / "bin", cargo_home / "registry", cargo_home / "git"]
    )
    return found


def _nextest() -> Detected:
    found = Detected(
        "cargo nextest run --no-fail-fast",
        "found Cargo.toml and .config/nextest.toml",
        notes=[
            f"Per-test results: soda reads {runners.LABELS['nextest']}, written outside the "
            "checkout: each run gets a tool config file (--tool-config-file) naming the "
            "report for the profile it runs. nextest runs no doctests; chain `cargo test "
            "--doc` after it to gate on them by exit code.",
            "One test: cargo nextest run --no-fail-fast -E 'test(=tests::name)'",
            "The jail has no network: crates come from cargo's registry cache (exposed "
            "read-only); run `cargo fetch` first.",
        ],
    )
    if shutil.which("cargo-nextest") is None:
        found.advice.append(
            "cargo-nextest is not on PATH: install it (cargo install cargo-nextest --locked), "
            "or set test_command to cargo test --no-fail-fast."
        )
    found.expose += _prefix_under_home("cargo-nextest", ("bin",))
    return found


def _libtest() -> Detected:
    return Detected(
        "cargo test --no-fail-fast",
        "found Cargo.toml",
        notes=[
            f"Per-test results: soda reads {runners.LABELS['cargo']}; without "
            "--no-fail-fast cargo stops at the first failing test target. Doctests are "
            "named without their line number.",
            "One test: cargo test --no-fail-fast tests::name -- --exact",
            "The jail has no network: crates come from cargo's registry cache (exposed "
            "read-only); run `cargo fetch` first.",
        ],
    )


def _prefix_under_home(program: str, parts: tuple[str, ...] = ()) -> list[str]:
    """The installation a program on PATH comes from (nvm's node, a Go SDK), when
    it lives under the home: its bin directory alone is not enough. With
    `parts`, only those directories of it."""
    path = shutil.which(program)
    if path is None:
        return []
    prefix = Path(os.path.realpath(path)).parent.parent
    return _under_home([prefix / part for part in parts] if parts else [prefix])


def _under_home(paths: list[Path]) -> list[str]:
    """The existing paths among `paths` that the jail hides (those under the home)."""
    home = Path(os.path.realpath(Path.home()))
    found = []
    for path in paths:
        real = Path(os.path.realpath(path))
        if real.exists() and real.is_relative_to(home) and real != home:
            found.append(str(real))
    return found
