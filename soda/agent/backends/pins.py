"""The coding CLIs soda knows, pinned: which npm package, which version, which
binary; where `soda tools install` puts them (soda's own directory, never a
global install) and how a configured backend's binary is found and checked.

Each executor that is a program has its `Pin` in its entry of the one registry
(`soda.agent.executors.EXECUTORS`). A CLI at another version may work, but its
event shapes and flags are not the ones soda was tested against, so `soda
doctor` fails on it and a person either installs the pinned one or points
`[executor] command` at a binary of that version.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from soda.errors import UserError


@dataclass(frozen=True)
class Pin:
    """One supported CLI at one version."""

    tool: str
    """The executor it is (`[executor] backend`), the name `soda tools install` takes."""
    package: str
    """Its npm package."""
    version: str
    """The version soda was tested against (exactly)."""
    binary: str
    """The executable npm links in `node_modules/.bin`."""


_VERSION = re.compile(r"(\d+\.\d+\.\d+)")
INSTALL_TIMEOUT_S = 900.0
"""An npm install of both CLIs takes about 10 s on a good line; a bound, not a goal."""


class ExecutorUnavailable(UserError):
    """The configured executor's binary is missing or at a version soda does not know."""


def tools_dir() -> Path:
    """Where `soda tools install` puts the CLIs: inside soda's own prefix (the
    virtualenv), so nothing is installed globally and a checkout's test set-up
    stays inside the checkout."""
    return Path(sys.prefix) / "share" / "soda" / "tools"


def installed_binary(pin: Pin) -> Path:
    """Where `soda tools install` links `pin`'s binary."""
    return tools_dir() / "node_modules" / ".bin" / pin.binary


def find_binary(pin: Pin, command: str | None) -> Path:
    """The binary to run for `pin`'s tool: `[executor] command` if set (a path or
    a name on PATH), else soda's install, else the pinned binary's name on PATH."""
    backend = pin.tool
    if command:
        found = shutil.which(os.path.expanduser(command))
        if found is None:
            raise ExecutorUnavailable(
                f"[executor] command = {command!r}: no such executable; install it with "
                f"`soda tools install {backend}` or fix the path in soda.toml"
            )
        return Path(found)
    own = installed_binary(pin)
    if own.exists():
        return own
    found = shutil.which(pin.binary)
    if found is None:
        raise ExecutorUnavailable(
            f"[executor] backend = {backend!r} needs {pin.binary} {pin.version}: run "
            f"`soda tools install {backend}`, or set [executor] command to its path"
        )
    return Path(found)


def binary_version(binary: Path) -> str | None:
    """The version `binary --version` prints (None if it does not run)."""
    try:
        done = subprocess.run(
            [str(binary), "--version"],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = _VERSION.search(done.stdout + done.stderr)
    return match.group(1) if match else None


def check_binary(pin: Pin, command: str | None) -> str:
    """`soda doctor`'s check: the binary exists and is the pinned version."""
    binary = find_binary(pin, command)
    backend = pin.tool
    version = binary_version(binary)
    if version != pin.version:
        seen = f"version {version}" if version else "no version it could read"
        raise ExecutorUnavailable(
            f"{binary} reports {seen}; soda supports {pin.package} {pin.version}: run "
            f"`soda tools install {backend}`"
        )
    return f"{backend}: {binary} ({pin.package} {version})"


def install(pins: list[Pin]) -> tuple[Path, str]:
    """npm-install the pinned CLIs into `tools_dir()`; those already there at the
    pinned version are left alone. The directory and npm's last lines."""
    npm = shutil.which("npm")
    if npm is None:
        raise UserError("soda tools install needs npm (Node.js 18 or later) on PATH")
    target = tools_dir()
    target.mkdir(parents=True, exist_ok=True)
    missing = [pin for pin in pins if binary_version(installed_binary(pin)) != pin.version]
    if not missing:
        return target, "already installed"
    specs = [f"{pin.package}@{pin.version}" for pin in missing]
    argv = [npm, "install", "--prefix", str(target), "--no-audit", "--no-fund", "--save-exact"]
    try:
        done = subprocess.run(
            [*argv, *specs],
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise UserError(f"npm install of {' '.join(specs)} took over {exc.timeout:.0f} s") from exc
    tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-3:])
    if done.returncode != 0:
        raise UserError(f"npm install {' '.join(specs)} failed: {tail.replace(chr(10), ' | ')}")
    for pin in pins:
        if not installed_binary(pin).exists():
            raise UserError(f"npm installed {pin.package} but no {pin.binary} binary")
    return target, tail
