"""`soda start --web`: `soda web` started in the background beside the daemon,
ending when the daemon ends (`--follow-pid`). Apart from `soda.cli.web` so that
the daemon's commands start it as a program, without importing the command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from soda.config import Config
from soda.errors import UserError
from soda.system.clock import SYSTEM_CLOCK

WEB_LOG = "web.log"
READY_SECONDS = 20.0
"""How long `soda start --web` waits for the dashboard to say where it serves."""


def start_beside(config: Config, directory: Path, daemon_pid: int, port: int) -> str:
    """Start `soda web` in the background beside the daemon `daemon_pid` (it ends
    when the daemon does); the line saying where it serves. Log: logs/web.log."""
    log_path = config.state_dir / "logs" / WEB_LOG
    log_path.parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "soda", "-C", str(directory), "web"]
    argv += ["--port", str(port), "--follow-pid", str(daemon_pid)]
    with log_path.open("w", encoding="utf-8") as log:
        child = subprocess.Popen(
            argv,
            cwd=directory,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = SYSTEM_CLOCK.monotonic() + READY_SECONDS
    while SYSTEM_CLOCK.monotonic() < deadline:
        lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        serving = [line for line in lines if line.startswith("soda web: serving")]
        if serving:
            return f"{serving[0]}; log: {log_path}"
        if child.poll() is not None:
            last = lines[-1] if lines else "(nothing in its log)"
            raise UserError(f"the dashboard did not start: {last.removeprefix('soda: ')}")
        SYSTEM_CLOCK.sleep(0.05)
    child.kill()
    child.wait()
    raise UserError(
        f"the dashboard did not say it serves within {READY_SECONDS:g} s; see {log_path}"
    )
