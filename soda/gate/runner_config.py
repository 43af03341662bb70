"""The other runners' configuration, held as conftest.py and pytest's settings are.

A change to what decides which tests a runner runs, how it reports them or what
wraps the test processes can rewrite the evidence the gate reads, so it waits
for a person (`soda.gate.rules.infrastructure_changes` asks here):

    files, anywhere    vitest.config.*, vitest.workspace.*, vite.config.* (vitest
                       reads it), jest.config.*, .mocharc*, .npmrc and .yarnrc*
                       (node-options=, script-shell=), .cargo/config(.toml)
                       (a `runner` wraps every test binary, rustflags),
                       .config/nextest.toml
    package.json       the scripts npm test runs (test, pretest, posttest,
                       test:* and those the test script names) and the "jest"
                       and "mocha" sections
    Cargo.toml         [profile.*], the test targets' settings ([lib], [[test]],
                       [[bench]], [[bin]], [[example]]: path, harness, test,
                       doctest) and [package] autotests and its kin

Go reads no test settings from the repository: its flags come from the command
and the environment (GOFLAGS), which soda sets.
"""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib
from pathlib import PurePosixPath

FILE_PATTERNS = (
    "vitest.config.*",
    "vitest.workspace.*",
    "vite.config.*",
    "jest.config.*",
    ".mocharc",
    ".mocharc.*",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.*",
)
"""Names (anywhere in the repository) of files that configure a runner."""
DIRECTORY_FILES = (".cargo/config", ".cargo/config.toml", ".config/nextest.toml")
"""Paths (under any directory) of files that configure a runner."""
SECTIONED = frozenset({"package.json", "Cargo.toml"})
"""Files held only when their runner sections change (`sections`)."""

_TARGET_KEYS = ("name", "path", "harness", "test", "doctest")
_AUTO = ("autotests", "autobenches", "autobins", "autoexamples", "autolib")


def is_config_file(path: str) -> bool:
    pure = PurePosixPath(path)
    if any(fnmatch.fnmatchcase(pure.name, pattern) for pattern in FILE_PATTERNS):
        return True
    return any(path == tail or path.endswith(f"/{tail}") for tail in DIRECTORY_FILES)


def sections(path: str, text: str | None) -> object:
    """What of `path` (package.json or Cargo.toml; None: absent) the runner
    reads, to compare between two commits; unreadable text compares as text."""
    if text is None:
        return None
    try:
        if PurePosixPath(path).name == "package.json":
            return _package_json(json.loads(text))
        return _cargo_toml(tomllib.loads(text))
    except (ValueError, AttributeError, TypeError):  # JSON, TOML or shape errors
        return ("unreadable", text)


def _package_json(data: object) -> object:
    if not isinstance(data, dict):
        return ("not an object", data)
    scripts = data.get("scripts")
    scripts = scripts if isinstance(scripts, dict) else {}
    test = str(scripts.get("test") or "")
    named = {
        name: value
        for name, value in scripts.items()
        if name in ("test", "pretest", "posttest")
        or name.startswith(("test:", "test-", "pretest:", "posttest:"))
        or re.search(
            rf"(?:^|[\s;&|])(?:npm|pnpm|yarn)(?:\s+run)?\s+{re.escape(name)}(?=$|[\s;&|])", test
        )
    }
    return {"scripts": named, "jest": data.get("jest"), "mocha": data.get("mocha")}


def _cargo_toml(data: dict[str, object]) -> object:
    package = data.get("package")
    package = package if isinstance(package, dict) else {}
    targets: dict[str, object] = {}
    for kind in ("lib", "test", "bench", "bin", "example"):
        found = data.get(kind)
        rows = [found] if isinstance(found, dict) else found if isinstance(found, list) else []
        targets[kind] = [
            {key: row.get(key) for key in _TARGET_KEYS} for row in rows if isinstance(row, dict)
        ]
    return {
        "profile": data.get("profile"),
        "targets": targets,
        "auto": {key: package.get(key) for key in _AUTO},
    }


def held_sentence() -> str:
    """The rule as an agent is told it (`soda.gate.rules.held_changes`)."""
    return (
        f"changes a test runner's configuration: any of {', '.join(FILE_PATTERNS)} or "
        f"{', '.join(DIRECTORY_FILES)} (anywhere in the repository), the test scripts "
        "(test, pretest, posttest, test:*, and those the test script runs) or the jest and "
        "mocha sections of package.json, or Cargo.toml's [profile] sections and its test "
        "targets' settings (path, harness, test, doctest, autotests)"
    )
