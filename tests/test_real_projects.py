"""The gate on real projects no one here wrote, through soda's public surface.

One project per language, each at a pinned version installed by
scripts/setup-tests: hashicorp/golang-lru 0.5.4 (a stdlib-only Go module, two
packages; Debian's golang-github-hashicorp-golang-lru-dev), fnv 1.0.7 (a
dependency-free Rust crate with unit tests and doctests; Debian's
librust-fnv-dev), and @jsumners/line-reporter 1.0.1 (a JavaScript package
tested with node's own test runner; npm). Each is copied into a new git
repository as its upstream has it, `soda init` writes the test command with no
hand edit, `soda doctor --tests` passes, and `soda run --once` with a scripted
model (ORIENT plans, the executor edits; everything else real: the jail, the
runner's own report, the gate) gives the five verdicts, each shown with the
runner's own test ids in `soda show` and on the web's iteration page:

- on a green base: a change that breaks existing tests is refused naming them,
  a new failing test is refused naming it, a harmless change merges;
- on a base already red (one failing test): a change that breaks another test
  is refused naming it, and a harmless change still merges.

The tasks of one run are gated one after another against the same base, so a
language costs two runs. The toolchains are part of the machine (Go and node
from Debian, cargo as the machine has it); a missing one fails here.
"""

from __future__ import annotations

import html
import json
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from soda.cli.demo import SCRIPT_PATH
from tests.conftest import git, soda
from tests.hostile_helpers import EXECUTOR_DONE, NOT_MET, VERIFIED
from tests.plan_fakes import plan, planning, task
from tests.scripts import submit
from tests.web_helpers import serving

REPO = Path(__file__).resolve().parents[1]

Edit = tuple[str, str, str]
"""(file, text, replacement); an empty text writes a new file."""


@dataclass(frozen=True)
class Real:
    tool: str
    source: Path
    command: str
    harmless: Edit
    breaking: Edit
    broken: tuple[str, ...]
    """The tests `breaking` makes fail (each passes on the base)."""
    new_test: Edit
    new_failing: str
    red: Edit
    """Turns `red_test` red on the base (the red-base runs start from it)."""
    red_test: str
    upstream: dict[str, str] = field(default_factory=dict)
    """Files the upstream repository has that the published copy leaves out."""


LRU = "github.com/hashicorp/golang-lru"
PROJECTS = {
    "go": Real(
        tool="go",
        source=Path("/usr/share/gocode/src") / LRU,
        command="go test -json ./...",
        harmless=("simplelru/lru.go", "package simplelru\n", "package simplelru\n\n// LRU.\n"),
        breaking=("simplelru/lru.go", "\treturn diff\n", "\treturn 0\n"),
        broken=(f"{LRU}/simplelru/TestLRU_Resize", f"{LRU}/TestLRUResize"),
        new_test=(
            "extra_test.go",
            "",
            'package lru\n\nimport "testing"\n\n'
            "func TestNewBehaviour(t *testing.T) {\n"
            '\tif _, err := New(0); err == nil {\n\t\tt.Fatal("a size of 0 is accepted")\n\t}\n'
            '\tt.Fatal("not written yet")\n}\n',
        ),
        new_failing=f"{LRU}/TestNewBehaviour",
        red=(
            "2q_test.go",
            "func Test2Q_Peek(t *testing.T) {\n",
            'func Test2Q_Peek(t *testing.T) {\n\tt.Fatal("red on the base")\n',
        ),
        red_test=f"{LRU}/Test2Q_Peek",
    ),
    "cargo": Real(
        tool="cargo",
        source=Path("/usr/share/cargo/registry/fnv-1.0.7"),
        command="cargo test --no-fail-fast",
        # Lines above both doctests: libtest's names for them change, their ids must not.
        harmless=("lib.rs", "//! ## About\n", "//! ## About\n//!\n//! (FNV-1a.)\n"),
        breaking=("lib.rs", "wrapping_mul(0x100000001b3)", "wrapping_mul(0x100000001b5)"),
        broken=("fnv/lib.rs::test::basic_tests",),
        new_test=(
            "lib.rs",
            "    #[test]\n    fn basic_tests() {\n",
            "    #[test]\n    fn new_behaviour() {\n"
            '        assert_eq!(fnv1a(b"soda"), 0);\n    }\n\n'
            "    #[test]\n    fn basic_tests() {\n",
        ),
        new_failing="fnv/lib.rs::test::new_behaviour",
        red=(
            "lib.rs",
            'map.insert(2, "two");\n```',
            'map.insert(2, "two");\nassert!(map.is_empty());\n```',
        ),
        red_test="fnv/doctest::lib.rs -",
        upstream={".gitignore": "/target\nCargo.lock\n"},
    ),
    "node": Real(
        tool="node",
        source=REPO / ".realjs" / "node_modules" / "@jsumners" / "line-reporter",
        command="npm test",
        harmless=("index.mjs", "function reportLine", "// One line a file.\nfunction reportLine"),
        # A file that is not node:test's (the tap fixture) counts as one failure.
        breaking=(
            "index.mjs",
            "failed: details.passed ? 0 : 1,",
            "failed: details.passed ? 0 : 2,",
        ),
        broken=("index.test.js::tap",),
        new_test=(
            "index.test.js",
            "test('tap', (t) => {\n",
            "test('quiet mode prints nothing', () => {\n  assert.equal(1, 2)\n})\n\n"
            "test('tap', (t) => {\n",
        ),
        new_failing="index.test.js::quiet mode prints nothing",
        red=(
            "index.test.js",
            "assert.match(stdout, /Passed: 3\\n/)",
            "assert.match(stdout, /Passed: 4\\n/)",
        ),
        red_test="index.test.js::all pass",
    ),
}


def the_plan(*tasks: dict[str, Any]) -> dict[str, Any]:
    """The planner's answer: one batch whose tasks run by key, one at a time here."""
    return submit("planner", planning(plan(*tasks, intent="three changes")))


def edits(change: Edit) -> list[dict[str, Any]]:
    """The executor's turn that makes `change`, then its submit."""
    path, old, new = change
    call = (
        {"name": "write_file", "input": {"path": path, "content": new}}
        if not old
        else {"name": "edit_file", "input": {"path": path, "old": old, "new": new}}
    )
    return [{"agent": "executor", "tool_calls": [call]}, EXECUTOR_DONE]


def apply(root: Path, change: Edit, message: str) -> None:
    path, old, new = change
    text = (root / path).read_text()
    assert old in text, (path, old)
    (root / path).write_text(text.replace(old, new, 1))
    git(root, "commit", "-q", "-am", message)


@dataclass
class Template:
    name: str
    real: Real
    root: Path
    init_output: str

    def copy(self, where: Path) -> Path:
        root = where / "repo"
        shutil.copytree(self.root, root, symlinks=True)
        return root


@pytest.fixture(scope="module")
def go_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One Go build cache for the module's runs, as one state directory keeps it
    (written by the toolchain alone: soda.gate.gocache)."""
    return tmp_path_factory.mktemp("go-build")


@pytest.fixture(scope="module", params=sorted(PROJECTS))
def template(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, go_cache: Path
) -> Iterator[Template]:
    """The project in a new repository, `soda init` run in it, the model scripted."""
    name = request.param
    real = PROJECTS[name]
    assert shutil.which(real.tool), f"{real.tool} is not on PATH: run scripts/setup-tests"
    assert real.source.is_dir(), f"{real.source} is missing: run scripts/setup-tests"
    root = tmp_path_factory.mktemp(name) / "repo"
    shutil.copytree(real.source, root)
    for path, text in real.upstream.items():
        (root / path).write_text(text)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "upstream")
    init = soda("init", cwd=root)
    assert init.returncode == 0, init.stdout + init.stderr
    config = (root / "soda.toml").read_text()
    for key, value in {"provider": "scripted", "strong": "scripted", "fast": "scripted"}.items():
        config = config.replace(f"\n{key} = ", f'\n{key} = "{value}" #', 1)
    settings = {
        "# script = (not set)": f'script = "{SCRIPT_PATH}"',
        "\ntask_retries = 1\n": "\ntask_retries = 0\n",  # one attempt: the verdict stands
        "\nmax_parallel_tasks = 3\n": "\nmax_parallel_tasks = 1\n",  # in the plan's order
    }
    for old, new in settings.items():
        assert old in config, old
        config = config.replace(old, new)
    (root / "soda.toml").write_text(config)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "soda")
    (root / SCRIPT_PATH).write_text('{"responses": []}')
    (root / "state" / "cache").mkdir(parents=True, exist_ok=True)
    (root / "state" / "cache" / "go-build").symlink_to(go_cache)
    yield Template(name, real, root, init.stdout)


def run_once(root: Path, responses: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
    """`soda run --once` with `responses` as the model: the iteration's ACT record
    and what `soda show` says of it."""
    (root / SCRIPT_PATH).write_text(json.dumps({"responses": responses}))
    run = soda("run", "--once", cwd=root, timeout=300)
    assert run.returncode in (0, 1), run.stdout + run.stderr
    db = sqlite3.connect(root / "state" / "soda.db")
    try:
        (act,) = db.execute("SELECT act_json FROM iterations").fetchone()
    finally:
        db.close()
    show = soda("show", "1", cwd=root)
    assert show.returncode == 0, show.stderr
    return json.loads(act), show.stdout


def tasks_of(act: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["key"]: t for t in act["tasks"]}


def test_init_writes_an_evidence_producing_command_and_doctor_passes(
    template: Template, tmp_path: Path
) -> None:
    real = template.real
    assert f"test_command = '{real.command}' (found " in template.init_output
    root = template.copy(tmp_path)
    doctor = soda("doctor", "--tests", cwd=root, timeout=300)
    checks = {line.split()[1]: line for line in doctor.stdout.splitlines() if line[:4].strip()}
    for check in ("tests", "jail", "gate", "imports"):
        assert checks[check].startswith("pass"), checks[check]
    assert "per-test" in checks["gate"] and "mandatory" in checks["gate"], checks["gate"]
    assert ", 0 failed" in checks["imports"], checks["imports"]


def test_on_a_green_base_breaking_and_failing_changes_are_refused_and_a_harmless_one_merges(
    template: Template, tmp_path: Path
) -> None:
    real = template.real
    root = template.copy(tmp_path)
    responses = [
        VERIFIED,
        NOT_MET,
        the_plan(
            task("1-breaks", title="Tidy"),
            task("2-adds", title="Add a test"),
            task("3-tidies", title="Doc"),
        ),
        *edits(real.breaking),
        *edits(real.new_test),
        *edits(real.harmless),
    ]
    act, show = run_once(root, responses)
    tasks = tasks_of(act)
    assert tasks["1-breaks"]["failure"] == "gate_failed", tasks["1-breaks"]
    for name in real.broken:
        assert name in tasks["1-breaks"]["reason"] and name in show, (name, tasks["1-breaks"])
    assert "passed before and fail now" in tasks["1-breaks"]["reason"]
    assert tasks["2-adds"]["failure"] == "gate_failed", tasks["2-adds"]
    assert real.new_failing in tasks["2-adds"]["reason"], tasks["2-adds"]
    assert "did not fail before" in tasks["2-adds"]["reason"]
    assert tasks["3-tidies"]["status"] == "completed", tasks["3-tidies"]
    assert act["merged_commit"], act
    spec = git(root, "show", f"soda/spec:{real.harmless[0]}")
    assert real.harmless[2].strip() in spec and real.breaking[2].strip() not in spec
    assert " 0 failed" in act["baseline"], act["baseline"]
    with serving(root) as web:  # the web's iteration page shows the same evidence
        status, _, page = web.request("GET", "/iteration/1")
    assert status == 200
    for name in (*real.broken, real.new_failing):
        assert html.escape(name, quote=False) in page, name


def test_on_a_red_base_a_change_breaking_another_test_is_refused_and_a_harmless_one_merges(
    template: Template, tmp_path: Path
) -> None:
    real = template.real
    root = template.copy(tmp_path)
    apply(root, real.red, "one test red on the base")
    responses = [
        VERIFIED,
        NOT_MET,
        the_plan(task("1-breaks", title="Tidy"), task("3-tidies", title="Doc")),
        *edits(real.breaking),
        *edits(real.harmless),
    ]
    act, show = run_once(root, responses)
    assert "1 failed" in act["baseline"], act["baseline"]
    tasks = tasks_of(act)
    assert tasks["1-breaks"]["failure"] == "gate_failed", tasks["1-breaks"]
    for name in real.broken:
        assert name in tasks["1-breaks"]["reason"], (name, tasks["1-breaks"])
    assert real.red_test not in tasks["1-breaks"]["reason"]  # red before: not this change's
    assert tasks["3-tidies"]["status"] == "completed", tasks["3-tidies"]
    assert act["merged_commit"], act
    assert real.red_test in show or "1 failed" in show
