"""A test run that could not import something: which module, and how to fix it.

The usual reason a project's tests fail in the jail before any test ran: the
environment the test command uses (a `.venv`, the Python on PATH) does not have
the project, pytest, or a dependency installed, and the jail cannot reach the
person's home or the network to find it elsewhere. pytest then dies loading a
conftest.py ("ImportError while loading conftest") or stops at collection
("ERROR collecting ..."), often without its report. `cannot_import` finds the
missing module in the run's output; `import_advice` says it in one message:
the module, the command and where it ran, and the fix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from soda.system.proc import command_words

_NO_MODULE = re.compile(
    r"(?:ModuleNotFoundError|ImportError): No module named '?([A-Za-z_][A-Za-z0-9_.]*)'?"
)
_BARE_NO_MODULE = re.compile(r"No module named '?([A-Za-z_][A-Za-z0-9_.]*)'?")
"""`python -m pytest` without pytest says only `...: No module named pytest`."""
_WHERE = re.compile(
    r"ImportError while loading conftest '([^']+)'|ERROR collecting (\S+)|"
    r"ImportError while importing test module '([^']+)'"
)
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")


@dataclass(frozen=True)
class MissingModule:
    """A module the tests could not import, and where that happened."""

    module: str
    """The module as Python named it (`pkg.sub`); `top` is its first part."""
    where: str = ""
    """The conftest.py or test module that imported it ('' when unknown)."""

    @property
    def top(self) -> str:
        return self.module.split(".")[0]

    def short(self) -> str:
        """What went wrong, in a few words (a test report's `problem`)."""
        if self.top in ("pytest", "_pytest"):
            return "pytest is not installed where the tests ran"
        where = f" (importing {self.where})" if self.where else ""
        return f"the tests cannot import {self.module!r}{where}"


def cannot_import(output: str, root: Path | None = None) -> MissingModule | None:
    """The first module a run's output says could not be imported, with the file
    whose import failed (relative to `root`, the repository's path in the run)."""
    found = _NO_MODULE.search(output) or _BARE_NO_MODULE.search(output)
    if found is None:
        return None
    where = ""
    place = _WHERE.search(output)
    if place is not None:
        where = next(group for group in place.groups() if group)
        if root is not None and Path(where).is_absolute() and Path(where).is_relative_to(root):
            where = str(Path(where).relative_to(root))
    return MissingModule(found.group(1), where)


def import_advice(missing: MissingModule, command: str, jailed: bool, what: str = "") -> str:
    """One message: what could not be imported (`what`: e.g. "on main (1a2b3c4d)"),
    the command and where it ran, and how to make the environment right."""
    ran = "in soda's jail" if jailed else "(sandbox.mode = none)"
    head = f"{missing.short()} {what}".rstrip()
    if missing.top in ("pytest", "_pytest"):
        install = install_hint(command, "pytest")
        fix = f"install it into the environment that command uses ({install})"
    else:
        fix = (
            "install the project (and its test dependencies) into the environment that "
            f"command uses ({install_hint(command, '-e .')})"
        )
    jail_hint = (
        "; the jail hides your home and has no network, so only what that environment "
        "has (or [sandbox] expose binds) is there"
        if jailed
        else ""
    )
    return (
        f"{head}: they ran with `{command}` {ran}{jail_hint}. Fix: {fix}, or set "
        "project.test_command to a command whose environment has it; "
        "`soda doctor --tests` checks"
    )


def install_hint(command: str, what: str) -> str:
    """How to install `what` into the environment `command` runs in."""
    words = command_words(command)
    if words and words[0] == "uv":
        return "uv sync"
    python = _python_of(words)
    return f"{python} -m pip install {what}" if python else f"pip install {what}"


def _python_of(words: list[str]) -> str | None:
    """The Python interpreter the command runs, as the command spells it, when
    it is one (`.venv/bin/python -m pytest` -> `.venv/bin/python`); for a
    `pytest` script in a bin directory, the python beside it."""
    if not words:
        return None
    program = words[0]
    name = Path(program).name
    if _PYTHON.match(name):
        return program
    if name in ("pytest", "py.test") and "/" in program:
        return str(Path(program).parent / "python")
    return None
