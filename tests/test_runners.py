"""Per-test evidence from every common runner, through the real gate in the real
jail: a small real project for each (a Go module, a JavaScript package on node's
own test runner, one on vitest, a Rust crate with a unit test and a doctest),
`soda init` writing its test command, and `soda.gate.tested` running it on clean
checkouts. Each project's base is already red (one failing test), as real
projects often are: the passing and the failing test are each named; a change
that breaks the passing one is refused naming it; a harmless change merges.

The toolchains are part of the machine (scripts/setup-tests installs Go and the
pinned vitest, and cargo-nextest into the virtualenv); a missing one fails here
rather than passing by skipping. The slowest is Go's first run (it compiles what
the tests use; later runs read soda's build cache) and each Rust case (a build a
checkout).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from git import Repo

from soda.cli.init import init_project
from soda.config import Config, load
from soda.gate import gocache, libtest
from soda.gate import tested as gate_tested
from soda.gate.rules import gate
from soda.gate.runner import TestReport, report_kind
from soda.gate.runners import invocation, selected
from soda.repo.checkouts import Checkouts
from soda.store import open_db
from soda.system.jail import Jail
from tests.conftest import git

VITEST = Path(__file__).resolve().parents[1] / ".vitest" / "node_modules"


@dataclass(frozen=True)
class Project:
    files: dict[str, str]
    command: str
    passing: str
    failing: str
    breaking: tuple[str, str, str]
    """(file, text, replacement): a change that makes `passing` fail."""
    harmless: tuple[str, str, str]


GO = Project(
    files={
        "go.mod": "module example.com/calc\n\ngo 1.19\n",
        "calc.go": "package calc\n\nfunc Add(a, b int) int { return a + b }\n",
        "calc_test.go": (
            'package calc\n\nimport "testing"\n\n'
            "func TestAdd(t *testing.T) {\n"
            '\tt.Run("small", func(t *testing.T) {\n'
            '\t\tif Add(1, 2) != 3 {\n\t\t\tt.Fatal("1+2 is not 3")\n\t\t}\n\t})\n}\n\n'
            'func TestRed(t *testing.T) { t.Fatal("red on the base") }\n'
        ),
    },
    command="go test -json ./...",
    passing="example.com/calc/TestAdd/small",
    failing="example.com/calc/TestRed",
    breaking=("calc.go", "return a + b", "return a - b"),
    harmless=("calc.go", "package calc\n", "// Package calc adds.\npackage calc\n"),
)

NODE = Project(
    files={
        "package.json": json.dumps({"name": "calc", "scripts": {"test": "node --test"}}),
        "calc.js": "exports.add = (a, b) => a + b;\n",
        "test/add.test.js": (
            "const { describe, test } = require('node:test');\n"
            "const assert = require('node:assert');\nconst { add } = require('../calc');\n"
            "describe('add', () => { test('small', () => assert.strictEqual(add(1, 2), 3)); });\n"
        ),
        "test/red.test.js": (  # the same titles in another file: ids need the file
            "const { describe, test } = require('node:test');\n"
            "describe('add', () => { test('small', () => { throw new Error('red'); }); });\n"
        ),
    },
    command="npm test",
    passing="test/add.test.js::add > small",
    failing="test/red.test.js::add > small",
    breaking=("calc.js", "a + b", "a - b"),
    harmless=("calc.js", "exports", "// adds\nexports"),
)

VITEST_PROJECT = Project(
    files={
        "package.json": json.dumps(
            {"name": "calc", "type": "module", "scripts": {"test": "vitest run"}}
        ),
        ".gitignore": "node_modules\n",
        # A TypeScript config: vite bundles it under node_modules/.vite-temp unless
        # told otherwise, and node_modules is read-only in the jail.
        "vitest.config.ts": (
            "import { defineConfig } from 'vitest/config'\n"
            "export default defineConfig({ test: { include: ['test/**/*.test.ts'] } })\n"
        ),
        "src/calc.ts": "export const add = (a: number, b: number): number => a + b\n",
        "test/add.test.ts": (
            "import { describe, expect, test } from 'vitest'\nimport { add } from '../src/calc'\n"
            "describe('add', () => { test('small', () => { expect(add(1, 2)).toBe(3) }) })\n"
        ),
        "test/red.test.ts": (
            "import { describe, expect, test } from 'vitest'\n"
            "describe('add', () => { test('small', () => { expect(1).toBe(2) }) })\n"
        ),
    },
    command="npm test",
    passing="test/add.test.ts::add > small",
    failing="test/red.test.ts::add > small",
    breaking=("src/calc.ts", "a + b", "a - b"),
    harmless=("src/calc.ts", "export", "// adds\nexport"),
)

CARGO = Project(
    files={
        "Cargo.toml": '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n',
        ".gitignore": "target/\n",
        "src/lib.rs": (
            "/// Adds.\n///\n/// ```\n/// assert_eq!(calc::add(1, 2), 3);\n/// ```\n"
            "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\n"
            "#[cfg(test)]\nmod tests {\n"
            "    #[test]\n    fn small() {\n        assert_eq!(super::add(1, 2), 3);\n    }\n"
            '    #[test]\n    fn red() {\n        panic!("red on the base");\n    }\n}\n'
        ),
    },
    command="cargo test --no-fail-fast",
    passing="calc/src/lib.rs::tests::small",
    failing="calc/src/lib.rs::tests::red",
    breaking=("src/lib.rs", "    a + b\n", "    a - b\n"),
    # Lines added above the doctest: its libtest name changes ("line 3" -> "line 5"),
    # its id must not.
    harmless=("src/lib.rs", "/// Adds.\n", "// A comment.\n// Another.\n/// Adds.\n"),
)

NEXTEST = Project(
    files={**CARGO.files, ".config/nextest.toml": "[profile.default]\nslow-timeout = '60s'\n"},
    command="cargo nextest run --no-fail-fast",
    passing="calc::tests::small",  # binary id::test (nextest runs no doctests)
    failing="calc::tests::red",
    breaking=CARGO.breaking,
    harmless=CARGO.harmless,
)

PROJECTS = {"go": GO, "node": NODE, "vitest": VITEST_PROJECT, "cargo": CARGO, "nextest": NEXTEST}
TOOLS = {"go": "go", "node": "node", "vitest": "node", "cargo": "cargo", "nextest": "cargo-nextest"}
NEXTEST_BIN = Path(sys.prefix) / "bin"
"""Where setup-tests puts cargo-nextest; on PATH for these tests (cargo finds its
subcommands there), and exposed to the jail with the rest of soda's Python."""


@dataclass
class Gated:
    root: Path
    config: Config
    jail: Jail
    checkouts: Checkouts
    db: object

    def tested(self, commit: str) -> TestReport:
        report, cached = gate_tested(self.config, self.jail, self.db, self.checkouts, commit)  # type: ignore[arg-type]
        assert not cached
        return report

    def commit(self, change: tuple[str, str, str], message: str) -> str:
        path, old, new = change
        text = (self.root / path).read_text()
        assert old in text, (path, old)
        (self.root / path).write_text(text.replace(old, new, 1))
        git(self.root, "commit", "-q", "-am", message)
        return git(self.root, "rev-parse", "HEAD")


def _project(tmp_path: Path, name: str) -> Iterator[Gated]:
    tool = TOOLS[name]
    assert shutil.which(tool), f"{tool} is not on PATH: run scripts/setup-tests"
    project = PROJECTS[name]
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    for path, text in project.files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    if name == "vitest":
        assert VITEST.is_dir(), "vitest is not installed: run scripts/setup-tests"
        (root / "node_modules").symlink_to(VITEST)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    report = init_project(root)
    assert report.test_command is not None and report.test_command.command == project.command
    assert "Per-test results" in " ".join(report.test_command.notes)
    config = load(root / "soda.toml")
    jail = Jail.for_config(config)
    checkouts = Checkouts(Repo(root), config.state_dir / "worktrees")
    try:
        yield Gated(root, config, jail, checkouts, open_db(config.db_path))
    finally:
        checkouts.remove_all()


@pytest.fixture(params=sorted(PROJECTS))
def project(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, Gated]]:
    monkeypatch.setenv("PATH", f"{NEXTEST_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    yield from ((request.param, gated) for gated in _project(tmp_path, request.param))


def test_each_runner_names_its_tests_and_the_gate_refuses_the_one_a_change_breaks(
    project: tuple[str, Gated],
) -> None:
    name, gated = project
    spec = PROJECTS[name]
    assert report_kind(gated.config) == name
    base = gated.tested(git(gated.root, "rev-parse", "HEAD"))
    assert base.detailed, (base.problem, base.output[-2000:])
    assert spec.passing in base.passed and spec.failing in base.failed, base
    assert base.failures[spec.failing].strip()  # the failure's own words are kept

    harmless = gated.tested(gated.commit(spec.harmless, "harmless"))
    verdict = gate(base, harmless, mandatory=True)
    assert verdict.ok, verdict.reason
    assert harmless.passed == base.passed  # no id changed (a doctest's line number)

    broken = gated.tested(gated.commit(spec.breaking, "break the passing test"))
    verdict = gate(harmless, broken, mandatory=True)
    assert not verdict.ok
    assert spec.passing in verdict.regressions  # (the doctest breaks with it)
    assert spec.passing in verdict.reason


PLANTING_TEST = """\
package calc

import (
\t"os"
\t"path/filepath"
\t"testing"
)

// Plants a file in the build cache (a forged entry would go there) and says
// where, so the test can look for it outside.
func TestPlants(t *testing.T) {
\tdir := os.Getenv("GOCACHE")
\tif err := os.WriteFile(filepath.Join(dir, "planted"), []byte("x"), 0o644); err != nil {
\t\tt.Fatal(err)
\t}
}
"""


def test_go_keeps_its_build_cache_but_the_tests_cannot_write_it(tmp_path: Path) -> None:
    """The cache in soda's state fills (the toolchain's warm-up writes it), the
    tests' own writes to it vanish, and every run runs the tests again (a test
    result in the cache would let a run skip them)."""
    for gated in _project(tmp_path, "go"):
        (gated.root / "plant_test.go").write_text(PLANTING_TEST)
        git(gated.root, "add", "-A")
        git(gated.root, "commit", "-q", "-m", "a test that writes the cache")
        first = gated.tested(git(gated.root, "rev-parse", "HEAD"))
        assert "example.com/calc/TestPlants" in first.passed, first.output[-2000:]
        cache = gocache.cache_dir(gated.config)
        assert sum(1 for _ in cache.rglob("*-d")) > 10  # compiled packages kept
        assert not list(cache.rglob("planted"))  # the test's write did not land
        again = gated.tested(gated.commit(GO.harmless, "harmless"))
        assert "example.com/calc/TestPlants" in again.passed
        assert "(cached)" not in again.output and not list(cache.rglob("planted"))


@pytest.mark.parametrize(
    ("command", "warm"),
    [
        ("go test -json ./...", "go test -json ./... -count=1 -exec /bin/true"),
        ("go test -json -count=5 ./pkg", "go test -json -count=5 ./pkg -count=1 -exec /bin/true"),
        ("go generate ./... && go test -json ./...", None),  # more than the toolchain
        # one test, as run_tests narrows it: quoted, and run with no shell
        (
            "go test -json ./pkg -run '^TestA$'",
            "go test -json ./pkg -run '^TestA$' -count=1 -exec /bin/true",
        ),
        ("go generate ./... && go test -json ./...", None),  # more than the toolchain
        ("go test -json $(go list ./...)", None),
        ("go test -json ./... -args -x", None),  # flags for the binary
        ("go test -json ./... -- -x", None),
        ("go test -json -exec ./wrap ./...", None),  # programs of their own
        ("go test -json -toolexec=./wrap ./...", None),
        ("go test -json --vettool ./vet ./...", None),
        ("go test -c -o x.test ./pkg", None),
        ("make test", None),
    ],
)
def test_only_a_plain_go_test_is_warmed(command: str, warm: str | None) -> None:
    words = gocache.warm_command(command)
    assert (shlex.join(words) if words is not None else None) == warm


@pytest.mark.parametrize(
    ("selector", "narrowed"),
    [
        ("calc::tests::small", "-E '(binary_id(=calc) & test(=tests::small))"),
        ("calc::it::case", "(binary_id(=calc::it) & test(=case))'"),  # an integration test
        ("small", "-E 'test(small)'"),
    ],
)
def test_nextest_runs_one_test_by_its_binary_and_name(selector: str, narrowed: str) -> None:
    command = selected("nextest", "cargo nextest run --no-fail-fast", selector)
    assert command is not None and command.startswith("cargo nextest run -E ")
    assert narrowed in command and command.endswith("--no-fail-fast")


def test_nextest_reports_for_the_profile_the_command_runs(tmp_path: Path) -> None:
    ran = invocation("nextest", "cargo nextest run -P ci", tmp_path, tmp_path)
    config = (tmp_path / "nextest.toml").read_text()
    assert config.startswith('[profile."ci".junit]\n') and str(ran.report) in config
    assert ran.command.startswith(f"cargo nextest run --tool-config-file soda:{tmp_path}/")
    assert ran.command.endswith("--no-fail-fast -P ci")


LIBTEST_DOCS = """\
   Doc-tests fnv

running 2 tests
test lib.rs - (line {second}) ... ok
test lib.rs - (line {first}) ... FAILED

failures:

---- lib.rs - (line {first}) stdout ----
Test executable failed (exit status: 101).
"""


def test_doctests_sharing_a_name_are_numbered_by_their_lines_not_their_finish(
    tmp_path: Path,
) -> None:
    """The crate's own docs name no item: both examples are `lib.rs -`. They run
    in parallel, so the order they finish in says nothing; the first in the file
    keeps the plain id wherever lines above move it."""
    ids = []
    for first, second in ((30, 51), (33, 54)):
        report = tmp_path / f"{first}.txt"
        report.write_text(LIBTEST_DOCS.format(first=first, second=second))
        parsed = libtest.parse_libtest(report)
        assert not isinstance(parsed, str), parsed
        ids.append((parsed.failed, parsed.passed))
        assert "exit status: 101" in parsed.excerpts["fnv/doctest::lib.rs -"]
    assert (
        ids[0]
        == ids[1]
        == (
            frozenset({"fnv/doctest::lib.rs -"}),
            frozenset({"fnv/doctest::lib.rs - #2"}),
        )
    )
