"""The gate: what must hold before a commit merges into the milestone branch.

`baseline` is the milestone tip's test run, `after` the candidate merge commit's,
both on clean checkouts in the jail (see `soda.gate.runner`). The rules, in order:

1. the run finished in time, and where a per-test report was asked for (pytest,
   `gate.junit`) it exists and reads; otherwise the merge is refused (fail closed);
2. the tests ran the checkout's code: no project module came from elsewhere;
3. no test fails afterwards that did not fail at baseline: a regression and a
   new failing test are refused alike;
4. the task's target tests (`PlanTask.target_tests`) pass afterwards: one that
   fails, is skipped or is not found refuses the merge (`GateResult.targets`
   names them, with their output; see `soda.gate.targets`); a task without
   target tests keeps rules 1-3 and 5;
5. no test that passed at baseline is missing or skipped afterwards, and the
   change touches no test infrastructure (`infrastructure_changes`): these are
   not refused outright but never merged on the gate's word either; a person
   approves them (`GateResult.approval` lists what to look at).

Exit-code-only runners (no report) merge only on exit code 0 (their target tests
cannot be told apart: the whole suite passing stands in). `held_changes` words
rule 5 for the agents that plan or change code, from the same tables.
"""

from __future__ import annotations

import configparser
import fnmatch
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from git import Repo

from soda.gate import runner_config
from soda.gate.runner import TestReport
from soda.gate.targets import TargetResult, covers, judge, listing
from soda.repo import objects
from soda.repo.refs import tree_of

SHOWN = 5

TEST_CONFIG_FILES = frozenset(
    {
        "conftest.py",
        "pytest.ini",
        ".pytest.ini",
        "pytest.toml",
        ".pytest.toml",
        "tox.ini",
        "noxfile.py",
    }
)
"""Files whose change can rewrite what the test runner reports."""

REPORT_TOKENS = (
    "PYTEST_ADDOPTS",
    "junit",
    "_pytest",
    "pluggy",
    "pluginmanager",
    "pytest_plugins",
    "pytest_runtest_",
    "pytest_sessionfinish",
    "pytest_sessionstart",
    "pytest_unconfigure",
    "pytest_configure",
    "pytest_collection",
    "pytest_report",
    "pytest_terminal",
    "pytest_load_initial",
    "atexit",
    "os._exit",
    "SODA_",
)
"""Words in added lines that reach into the test runner or its report. The runner
executes in one process with the code under test, so such code could rewrite
results; a change that mentions them waits for a person."""

CODE_SUFFIXES = frozenset({".py", ".pyi", ".pth", ".cfg", ".ini", ".toml"})

SHADOWING_NAMES = frozenset(
    {
        "pytest",
        "_pytest",
        "py",
        "pluggy",
        "iniconfig",
        "xml",
        "site",
        "sitecustomize",
        "usercustomize",
        "encodings",
    }
)
"""Top-level modules a repository file could shadow to fake the runner or its report."""

NOT_PROJECT_MODULES = frozenset({"tests", "test", "testing", "conftest", "setup", "docs"})


def held_changes(protected: Sequence[str]) -> list[str]:
    """The changes the gate never merges on its own word, one sentence each, as an
    agent is told them (from the same tables `infrastructure_changes` and `gate`
    apply, so the telling cannot drift from the rule). `protected`: `[gate]
    protected`."""
    held = [
        f"changes any of {', '.join(sorted(TEST_CONFIG_FILES))} (anywhere in the "
        "repository), or the pytest, tox or coverage settings in pyproject.toml or setup.cfg",
        runner_config.held_sentence(),
        f"adds lines to a code or config file ({', '.join(sorted(CODE_SUFFIXES))}) that "
        f"mention any of: {', '.join(REPORT_TOKENS)}",
        "adds a .pth file, or a top-level file or directory named like a module the test "
        f"runner loads ({', '.join(sorted(SHADOWING_NAMES))})",
        "leaves a test that passed before missing or skipped afterwards (deleted, renamed, "
        "skipped or no longer collected)",
    ]
    if protected:
        held.insert(1, f"changes a file matching {', '.join(protected)} ([gate] protected)")
    return held


@dataclass(frozen=True)
class GateResult:
    ok: bool
    reason: str
    regressions: tuple[str, ...] = ()
    approval: tuple[str, ...] = ()
    """When not ok only for reasons a person may accept: what they must look at."""
    targets: tuple[TargetResult, ...] = ()
    """When refused because target tests of the task do not pass (and for no
    other reason): each of them, with its output."""

    @property
    def targets_failed(self) -> bool:
        """Refused for the task's target tests alone."""
        return not self.ok and bool(self.targets)


def _listing(names: set[str] | frozenset[str]) -> str:
    ordered = sorted(names)
    return ", ".join(ordered[:SHOWN]) + (" ..." if len(ordered) > SHOWN else "")


def gate(
    baseline: TestReport,
    after: TestReport,
    mandatory: bool = False,
    infrastructure: tuple[str, ...] = (),
    targets: Sequence[str] = (),
) -> GateResult:
    """Judge `after` against `baseline`. `mandatory`: a per-test report was asked
    for, so its absence refuses. `infrastructure`: test-infrastructure files the
    change touches (these need a person). `targets`: the task's target tests,
    which must pass afterwards."""
    if after.timed_out:
        return GateResult(False, "tests timed out after the change")
    for label, report in (("at baseline", baseline), ("after the change", after)):
        if (mandatory or baseline.detailed) and not report.detailed:
            why = report.problem or "no per-test report"
            return GateResult(False, f"refusing to merge: {why} ({label})")
        if report.foreign_imports:
            return GateResult(
                False,
                f"the tests {label} did not run the checkout's code: they imported "
                f"{_listing(set(report.foreign_imports))}; install the project from the "
                "repository itself (pip install -e .) in an environment soda can bind "
                "(sandbox.bind_ignored, sandbox.expose); `soda doctor` shows the details",
            )
    if not after.detailed:
        if after.returncode == 0:
            unchecked = "; target tests not checked one by one (no per-test report)"
            return _approval_or_ok(
                infrastructure, (), "test command passed" + (unchecked if targets else "")
            )
        return GateResult(
            False,
            f"test command failed with exit code {after.returncode} and gave no per-test report",
        )
    results = judge(after, list(targets))
    missed = tuple(result for result in results if not result.passed)
    also = f"; target tests not passing: {listing(list(missed))}" if missed else ""
    regressions = after.failed & baseline.passed
    if regressions:
        return GateResult(
            False,
            f"{len(regressions)} test(s) passed before and fail now: {_listing(regressions)}"
            + also,
            tuple(sorted(regressions)),
        )
    # A failing test that is a target of the task is refused as a target below.
    of_targets = {name for name in after.failed if any(covers(r.target, name) for r in missed)}
    new_failures = after.failed - baseline.failed - of_targets
    if new_failures:
        return GateResult(
            False,
            f"{len(new_failures)} test(s) fail after the change that did not fail before: "
            f"{_listing(new_failures)}" + also,
            tuple(sorted(new_failures)),
        )
    if missed:
        return GateResult(
            False,
            f"{len(missed)} of the task's {len(results)} target test(s) do not pass after "
            f"the change: {listing(list(missed))}",
            tuple(sorted(of_targets)),
            targets=missed,
        )
    missing = baseline.passed - after.passed
    removed = (f"test passed before, missing or skipped now: {name}" for name in sorted(missing))
    proven = f"; target tests pass: {', '.join(r.target for r in results)}" if results else ""
    return _approval_or_ok(
        infrastructure,
        tuple(removed),
        f"no regressions ({after.summary()}){proven}",
        f"{len(missing)} test(s) passed before and are missing or skipped now: {_listing(missing)}"
        if missing
        else "",
    )


def _approval_or_ok(
    infrastructure: tuple[str, ...], removed: tuple[str, ...], ok_reason: str, why: str = ""
) -> GateResult:
    items = tuple(f"changes test infrastructure: {path}" for path in infrastructure) + removed
    if not items:
        return GateResult(True, ok_reason)
    reasons = [why] if why else []
    if infrastructure:
        reasons.append(f"the change touches test infrastructure: {_listing(set(infrastructure))}")
    return GateResult(False, "; ".join(reasons) + " (needs a person's approval)", approval=items)


def infrastructure_changes(repo: Repo, old: str, new: str, protected: list[str]) -> tuple[str, ...]:
    """Paths changed between `old` and `new` that can change what the test runner
    reports: conftest.py, pytest/tox/nox configuration (the pytest and tox
    sections of pyproject.toml and setup.cfg), the other runners' configuration
    (`soda.gate.runner_config`), files shadowing the runner's own modules, and
    what `gate.protected` lists."""
    changed = changed_files(repo, old, new)
    hits = []
    for path in changed:
        pure = PurePosixPath(path)
        top = pure.parts[0].removesuffix(".py")
        if (
            pure.name in TEST_CONFIG_FILES
            or top in SHADOWING_NAMES
            or pure.suffix == ".pth"
            or runner_config.is_config_file(path)
            or any(fnmatch.fnmatch(path, pattern) for pattern in protected)
        ):
            hits.append(path)
        elif _runner_sections(repo, old, path) != _runner_sections(repo, new, path):
            hits.append(f"{path} (test runner section)")
    hits += _report_tampering(repo, old, new, [p for p in changed if _is_code(p)])
    return tuple(dict.fromkeys(hits))


def changed_files(repo: Repo, old: str, new: str) -> list[str]:
    """The paths `git diff --name-only --no-renames old new` lists, in its order,
    from the object database (no git process); git's own answer when the object
    database cannot give it."""
    try:
        trees = tree_of(repo, old), tree_of(repo, new)
        return [c.path for c in objects.changed_paths(repo, *trees, limit=100_000)]
    except objects.Undecided:
        listed = repo.git.diff("--name-only", "--no-renames", "-z", old, new)
        return [path for path in listed.split("\0") if path]


def _is_code(path: str) -> bool:
    return PurePosixPath(path).suffix in CODE_SUFFIXES


def _report_tampering(repo: Repo, old: str, new: str, code: list[str]) -> list[str]:
    """Changed files whose added lines mention the runner's or the report's
    machinery: only code files can act on them (prose may mention the words), so
    only those are diffed, and no diff runs when none changed."""
    if not code:
        return []
    diff = repo.git.diff(
        "-U0", "--no-renames", "--no-ext-diff", "--no-textconv", old, new, "--",
        *(f":(literal){path}" for path in code),
    )  # fmt: skip
    hits: dict[str, set[str]] = {}
    path = ""
    for line in diff.splitlines():
        if line.startswith("+++ "):
            path = line[6:] if line.startswith("+++ b/") else ""
            if not _is_code(path):
                path = ""  # prose may mention these words; only code can act on them
        elif line.startswith("+") and path:
            found = {token for token in REPORT_TOKENS if token in line}
            if found:
                hits.setdefault(path, set()).update(found)
    return [f"{path} (mentions {', '.join(sorted(words))})" for path, words in hits.items()]


def _runner_sections(repo: Repo, commit: str, path: str) -> object:
    """What of `path` at `commit` a test runner reads (None for other files)."""
    name = PurePosixPath(path).name
    if name in ("pyproject.toml", "setup.cfg"):
        return _test_sections(repo, commit, path)
    if name in runner_config.SECTIONED:
        return runner_config.sections(path, _file_text(repo, commit, path))
    return None


def _test_sections(repo: Repo, commit: str, path: str) -> object:
    text = _file_text(repo, commit, path)
    if text is None:  # the file does not exist at that commit
        return None
    try:
        if path.endswith(".toml"):
            tool = tomllib.loads(text).get("tool", {})
            return {key: tool.get(key) for key in ("pytest", "tox", "coverage")}
        parser = configparser.ConfigParser(interpolation=None)
        parser.read_string(text)
        return {
            name: dict(parser[name])
            for name in parser.sections()
            if name.startswith(("tool:pytest", "pytest", "tox"))
        }
    except (tomllib.TOMLDecodeError, configparser.Error):
        return ("unreadable", text)  # compared as text: any change counts


def _file_text(repo: Repo, commit: str, path: str) -> str | None:
    """The text of `path` at `commit` (`git show commit:path`), None when there is
    no such file; from the object database, git when that cannot say."""
    try:
        entry = objects.entry_at(repo, tree_of(repo, commit), path)
        if entry is None:
            return None
        if entry[0] != objects.TREE_MODE:
            text = objects.read(repo, entry[1], "blob").decode("utf-8", errors="replace")
            return text.removesuffix("\n")  # as GitPython gives git's output
    except objects.Undecided:
        pass
    try:
        return str(repo.git.show(f"{commit}:{path}"))
    except Exception:  # the file does not exist at that commit
        return None


def own_modules(repo: Repo, commit: str) -> frozenset[str]:
    """The project's top-level Python modules at `commit` (flat and src layouts):
    read from the top of the tree and the directories there (no git process)."""
    try:
        names = set()
        top = objects.tree_entries(repo, tree_of(repo, commit))
        layers = [top]
        if "src" in top and top["src"][0] == objects.TREE_MODE:
            layers.append(objects.tree_entries(repo, top["src"][1]))
        for entries in layers:
            for name, (mode, sha) in entries.items():
                if mode != objects.TREE_MODE:
                    if name.endswith(".py"):
                        names.add(name.removesuffix(".py"))
                else:
                    init = objects.tree_entries(repo, sha).get("__init__.py")
                    if init is not None and init[0] != objects.TREE_MODE:
                        names.add(name)
        return frozenset(names - NOT_PROJECT_MODULES - {"src"})
    except objects.Undecided:
        return _own_modules_from_git(repo, commit)


def _own_modules_from_git(repo: Repo, commit: str) -> frozenset[str]:
    names = set()
    for path in repo.git.ls_tree("-r", "--name-only", "-z", commit).split("\0"):
        parts = PurePosixPath(path).parts
        if parts[:1] == ("src",):
            parts = parts[1:]
        if len(parts) == 1 and parts[0].endswith(".py"):
            names.add(parts[0].removesuffix(".py"))
        elif len(parts) == 2 and parts[1] == "__init__.py":
            names.add(parts[0])
    return frozenset(names - NOT_PROJECT_MODULES)
