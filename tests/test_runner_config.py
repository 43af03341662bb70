"""The other runners' configuration is held as pytest's is: a change to a vitest,
jest or mocha config, npm's or cargo's settings, nextest's, or the runner
sections of package.json and Cargo.toml waits for a person; the rest of those
files (a dependency, the version, a build script) does not. On a real
repository, through `infrastructure_changes` (what the merge asks)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from git import Repo

from soda.gate.rules import held_changes, infrastructure_changes
from tests.conftest import git

PACKAGE = {
    "name": "p",
    "version": "1.0.0",
    "scripts": {"test": "npm run lint && npm run unit", "unit": "node --test", "build": "tsc"},
    "jest": {"testEnvironment": "node"},
    "dependencies": {"a": "^1.0.0"},
}
CARGO = """\
[package]
name = "p"
version = "0.1.0"

[dependencies]
fnv = "1"

[profile.test]
opt-level = 0

[[test]]
name = "it"
path = "tests/it.rs"
"""


def commit(repo: Path, files: dict[str, str]) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", "c")
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def base(repo: Path) -> str:
    return commit(repo, {"package.json": json.dumps(PACKAGE), "Cargo.toml": CARGO})


def package(**changes: object) -> str:
    return json.dumps({**PACKAGE, **changes})


@pytest.mark.parametrize(
    "files",
    [
        {"vitest.config.ts": "export default {}\n"},
        {"web/vite.config.mjs": "export default {}\n"},
        {"jest.config.js": "module.exports = {}\n"},
        {".mocharc.yml": "spec: test\n"},
        {".mocharc": "{}\n"},
        {".npmrc": "node-options=--require ./fake.js\n"},
        {".yarnrc.yml": "nodeOptions: x\n"},
        {".cargo/config.toml": '[target.x86_64-unknown-linux-gnu]\nrunner = "true"\n'},
        {"crates/a/.cargo/config": "[build]\n"},
        {".config/nextest.toml": "[profile.default]\nretries = 3\n"},
        {"package.json": package(scripts={**PACKAGE["scripts"], "unit": "node --test || true"})},
        {"package.json": package(scripts={**PACKAGE["scripts"], "pretest": "node fake.js"})},
        {"package.json": package(scripts={**PACKAGE["scripts"], "test:e2e": "x"})},
        {"package.json": package(jest={"reporters": ["./fake.js"]})},
        {"package.json": package(mocha={"reporter": "./fake.js"})},
        {"Cargo.toml": CARGO.replace("opt-level = 0", "overflow-checks = false")},
        {"Cargo.toml": CARGO + "harness = false\n"},
        {"Cargo.toml": CARGO.replace('version = "0.1.0"', 'version = "0.1.0"\nautotests = false')},
        {"Cargo.toml": CARGO + "\n[lib]\ndoctest = false\n"},
        {"package.json": "{not json"},
    ],
    ids=lambda files: next(iter(files)),
)
def test_a_runner_config_change_needs_a_person(
    repo: Path, base: str, files: dict[str, str]
) -> None:
    after = commit(repo, files)
    found = infrastructure_changes(Repo(repo), base, after, [])
    (path,) = files
    expected = f"{path} (test runner section)" if path in ("package.json", "Cargo.toml") else path
    assert found == (expected,)


def test_the_rest_of_package_json_and_cargo_toml_merges_on_the_tests(repo: Path, base: str) -> None:
    after = commit(
        repo,
        {
            "package.json": package(
                version="1.1.0",
                dependencies={"a": "^2.0.0"},
                scripts={**PACKAGE["scripts"], "build": "tsc -p ."},  # not run by the tests
            ),
            "Cargo.toml": CARGO.replace('fnv = "1"', 'fnv = "1.0.7"\nitoa = "1"'),
            "src/config.ts": "export const vitest = 1\n",  # named like one, not one
            "docs/jest.md": "jest.config.js is where ...\n",
        },
    )
    assert infrastructure_changes(Repo(repo), base, after, []) == ()
    # A script the test script runs is the test script's.
    held = commit(repo, {"package.json": package(scripts={**PACKAGE["scripts"], "lint": "x"})})
    assert infrastructure_changes(Repo(repo), after, held, []) == (
        "package.json (test runner section)",
    )


def test_agents_are_told_the_runner_rules() -> None:
    told = " ".join(held_changes([]))
    for name in ("vitest.config.*", "jest.config.*", ".mocharc*", ".cargo/config.toml"):
        assert name.rstrip("*") in told, name
    assert "package.json" in told and "Cargo.toml's [profile]" in told
