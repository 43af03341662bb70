"""What the web dashboard's tests share: a real `soda web` server process on
127.0.0.1, a real headless Chromium driven by Playwright (Debian's `chromium`,
installed by scripts/setup-tests), and plain HTTP requests for the attacks."""

from __future__ import annotations

import http.client
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_for

CHROMIUM = Path("/usr/bin/chromium")
SETUP = "run scripts/setup-tests (it installs Debian's chromium and the [web] extra)"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
EXPECT_SECONDS = 15
ARTIFACTS = Path(tempfile.gettempdir()) / "soda-web-screenshots"
"""Where the tests keep a screenshot of each page they look at (to look at)."""


class WebServer:
    """`soda web --port 0` on a project, as a person starts it; stopped by PID."""

    def __init__(self, root: Path, *extra: str, env: dict[str, str] | None = None) -> None:
        self.root = root
        self.log = root / "state" / "web-test.log"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "soda", "-C", str(root), "web", "--port", "0", *extra],
                cwd=root,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
            )
        line = wait_for(self._serving, 30, "soda web to say where it serves")
        self.url = line.split("serving ", 1)[1].split(" ", 1)[0]
        self.base = self.url.split("?", 1)[0].rstrip("/")
        self.port = int(self.base.rsplit(":", 1)[1])

    def _serving(self) -> str | None:
        text = self.log.read_text()
        if self.process.poll() is not None:
            raise AssertionError(f"soda web exited {self.process.returncode}: {text}")
        return next((x for x in text.splitlines() if x.startswith("soda web: serving")), None)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def request(
        self,
        method: str,
        path: str,
        body: str = "",
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, str], str]:
        """One real HTTP request; status, headers (lower-case) and body."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            sent = {"Host": f"127.0.0.1:{self.port}", **(headers or {})}
            if body:
                sent.setdefault("Content-Type", "application/x-www-form-urlencoded")
            conn.request(method, path, body=body.encode(), headers=sent)
            response = conn.getresponse()
            found = {k.lower(): v for k, v in response.getheaders()}
            return response.status, found, response.read().decode("utf-8", "replace")
        finally:
            conn.close()

    def csrf(self) -> str:
        """The CSRF token the server puts in its pages."""
        _, _, html = self.request("GET", "/")
        match = re.search(r'name="csrf" value="([^"]+)"', html)
        assert match, html[:500]
        return match.group(1)


@contextmanager
def serving(root: Path, *extra: str, env: dict[str, str] | None = None) -> Iterator[WebServer]:
    server = WebServer(root, *extra, env=env)
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium context (one per test module), or a failure naming
    the missing set-up."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: {SETUP}")
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        pytest.fail(f"playwright is not installed: {SETUP}")
    # A loaded machine (two cores, two workers, a browser) is slow: conditions
    # get 15 s unless a test asks for less (a live event: one second).
    expect.set_options(timeout=EXPECT_SECONDS * 1000)
    with sync_playwright() as playwright, tempfile.TemporaryDirectory() as profile:
        context = playwright.chromium.launch_persistent_context(
            profile,
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield context
        finally:
            context.close()


def screenshot(page: Any, name: str) -> Path:
    """Keep a screenshot of `page` as a test artifact; its path."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
