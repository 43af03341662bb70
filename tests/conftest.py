"""Shared fixtures: every test gets its own repository and state, and no test can
reach a real model API (the only fake in this suite is the model)."""

from __future__ import annotations

import ipaddress
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlite_utils import Database

from soda.store.db import now

# Commits made by tests (and by soda under test) need an identity even on a
# machine with no git config, and must not read the developer's own config.
os.environ.update(
    {
        "GIT_AUTHOR_NAME": "soda-test",
        "GIT_AUTHOR_EMAIL": "soda-test@example.invalid",
        "GIT_COMMITTER_NAME": "soda-test",
        "GIT_COMMITTER_EMAIL": "soda-test@example.invalid",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
)

_real_connect = socket.socket.connect


class RealNetworkCall(AssertionError):
    """A test tried to reach a host other than this machine."""


def _guarded_connect(self: socket.socket, address: object) -> None:
    if self.family in (socket.AF_INET, socket.AF_INET6):
        host = address[0] if isinstance(address, tuple) else str(address)
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = host == "localhost"
        if not loopback:
            raise RealNetworkCall(f"test tried to connect to {address!r}: no real network in tests")
    return _real_connect(self, address)


@pytest.fixture(autouse=True)
def _no_real_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any connection off loopback fails loudly; real API keys are removed."""
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "OPENAI_")):
            monkeypatch.delenv(name)


def wait_for(condition: Callable[[], Any], seconds: float, what: str) -> Any:
    """Poll `condition` until it returns something truthy (returned), failing the
    test after `seconds`: tests wait for what they can observe, never a fixed sleep."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {seconds}s waiting for {what}")


def git(cwd: Path, *args: str) -> str:
    """Run git in `cwd` and return its stdout (tests' own git helper)."""
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def soda(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the soda CLI in a real subprocess, as a person would."""
    return subprocess.run(
        [sys.executable, "-m", "soda", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def insert_run(db: Database, pid: int | None = None) -> int:
    """A `runs` row for tests that exercise one phase without Session.open."""
    with db.conn:
        row = {
            "started_at": now(),
            "spec_path": "specs/SPEC.md",
            "milestone": "spec",
            "milestone_branch": "soda/spec",
            "base_branch": "main",
            "status": "running",
            "pid": pid,
        }
        return int(db["runs"].insert(row).last_pk)


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Path]:
    """A fresh git repository on branch main with one commit."""
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("# sample\n")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "initial")
    yield path


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium per test module (the dashboard's tests)."""
    from tests.web_helpers import chromium  # playwright: only where a test asks

    with chromium() as context:
        yield context


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page in the module's browser, closed after the test."""
    page = browser.new_page()
    yield page
    page.close()


HEAVY: dict[str, tuple[str, ...]] = {
    "browser": ("test_web.py", "test_web_actions.py"),
    "fleet": (
        "test_fleet.py",
        "test_fleet_approval.py",
        "test_fleet_rebuild.py",
        "test_fleet_worker.py",
        "test_tracker_fleet.py",
    ),
    "cli_executor": (
        "test_cli_executor.py",
        "test_cli_executor_attacks.py",
        "test_cli_executor_faults.py",
        "test_cli_rate_limit.py",
    ),
}
"""Test files that need a heavy outside program, by marker: Chromium (browser), the
Temporal dev server (fleet), the coding CLIs from npm (cli_executor). A developer's
inner loop leaves them out (`-m "not browser and not fleet and not cli_executor"`);
the README's test command, and CI, run everything."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test of a heavy file with its marker (see HEAVY)."""
    for item in items:
        name = item.path.name
        for marker, files in HEAVY.items():
            if name in files:
                item.add_marker(getattr(pytest.mark, marker))
