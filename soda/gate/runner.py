"""Running the project's tests in the jail and reading what they did.

A run happens on a clean checkout of one commit (see `soda.repo.checkouts`), in
the jail, and yields a `TestReport`: per-test results when a JUnit XML report is
available, the exit code otherwise. Where the report comes from:

- pytest (the test command mentions it): soda asks for the report through
  `PYTEST_ADDOPTS` at a path *outside* the checkout, so the change under test
  cannot write or delete it. The report is mandatory: missing, empty or
  unreadable, the run is marked with a `problem` and the gate refuses (when
  the tests could not import something, the problem names the module:
  `soda.gate.imports`).
  A small plugin rides along (`-p soda_probe`) and records which files the
  tests imported, so the gate can prove the checkout's code is what ran.
- go test, cargo test, vitest, jest, mocha, node --test (and `npm test` running
  one of them): soda adds the runner's own report option, again at a path
  outside the checkout (`soda.gate.runners`), and reads it
  (`soda.gate.reports`). Mandatory too: a run without it is refused. Go's
  build cache is kept between runs, written by the toolchain alone
  (`soda.gate.gocache`).
- any other runner: `gate.junit` names where the command writes its report
  (relative to the repository); soda deletes it before the run and refuses a
  commit that tracks a file there.
- none of these: exit code only (`soda doctor` says that gate is weak).

Results are cached by tree id (`soda.store.test_results`): an unchanged
milestone tip is never tested twice.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from soda.config import Config
from soda.gate import gocache, runners
from soda.gate.imports import cannot_import
from soda.gate.reports import Parsed, parse_junit
from soda.system.jail import Jail, Mount

PROBE = '''\
"""soda's import probe: records the file of every module the tests imported."""
import os, sys


def pytest_sessionfinish(session, exitstatus):
    out = os.environ.get("SODA_PROBE_OUT")
    if not out:
        return
    with open(out, "w", encoding="utf-8") as f:
        for name, module in sorted(sys.modules.items()):
            path = getattr(module, "__file__", None)
            if isinstance(path, str):
                f.write(f"{name}\\t{os.path.realpath(path)}\\n")
'''


@dataclass(frozen=True)
class TestReport:
    """What one test run did."""

    __test__ = False  # not a pytest test class

    returncode: int | None
    timed_out: bool
    passed: frozenset[str] = field(default_factory=frozenset)
    failed: frozenset[str] = field(default_factory=frozenset)
    detailed: bool = False
    """True when per-test results were available (the runner's own report)."""
    output: str = ""
    skipped: frozenset[str] = field(default_factory=frozenset)
    problem: str | None = None
    """Why a mandatory per-test report is missing (None when it is fine)."""
    foreign_imports: tuple[str, ...] = ()
    """'module from path' for project modules the tests imported from outside the
    checkout: the tests did not run the code under test."""
    failures: dict[str, str] = field(default_factory=dict)
    """First lines of each failure's message, by test id (bounded)."""

    def summary(self) -> str:
        if self.timed_out:
            return "test command timed out"
        if self.detailed:
            skipped = f", {len(self.skipped)} skipped" if self.skipped else ""
            return (
                f"{len(self.passed)} passed, {len(self.failed)} failed{skipped} "
                f"(exit {self.returncode})"
            )
        if self.problem:
            return f"exit code {self.returncode}; {self.problem}"
        return f"exit code {self.returncode} (no per-test report)"

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        for key in ("passed", "failed", "skipped"):
            data[key] = sorted(data[key])
        data["foreign_imports"] = list(self.foreign_imports)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TestReport:
        return cls(
            returncode=data["returncode"],
            timed_out=data["timed_out"],
            passed=frozenset(data["passed"]),
            failed=frozenset(data["failed"]),
            detailed=data["detailed"],
            output=data["output"],
            skipped=frozenset(data["skipped"]),
            problem=data["problem"],
            foreign_imports=tuple(data["foreign_imports"]),
            failures=dict(data["failures"]),
        )


def is_pytest(command: str) -> bool:
    return bool(runners._PATTERNS["pytest"].search(command))


def report_kind(config: Config) -> str:
    """'junit' (gate.junit), the runner soda reads on its own (one of
    `runners.KINDS`: 'pytest', 'go', 'cargo', 'vitest', ...), or 'exit-code'
    (the weak gate)."""
    if config.gate.junit:
        return "junit"
    return runners.kind_of(config.project.test_command, config.root) or "exit-code"


def run_tests(
    config: Config,
    jail: Jail,
    checkout: Path,
    own_modules: frozenset[str] = frozenset(),
    sealed: bool = False,
) -> TestReport:
    """Run the test command on `checkout` (a clean checkout) in the jail.
    `own_modules` are the project's top-level Python modules; an import of one
    of them from outside the checkout is reported in `foreign_imports`.
    `sealed`: the run cannot change the checkout (`Jail.can_seal`); never with
    `gate.junit`, whose report is read from the checkout."""
    if sealed and report_kind(config) == "junit":
        raise ValueError("a gate.junit report is written into the checkout: no sealed run")
    kind = report_kind(config)
    # Where the checkout's files appear to the tests: the repository's own path
    # in the jail, the checkout itself without one.
    root = jail.repo_root if jail.mode != "none" else Path(os.path.realpath(checkout))
    with tempfile.TemporaryDirectory(prefix="soda-tests-") as tmp:
        reports = Path(tmp)
        command, env = config.project.test_command, {}
        mounts: list[Mount] = []
        nonce, report = None, reports / "report.xml"
        if kind == "pytest":
            (reports / "soda_probe.py").write_text(PROBE, encoding="utf-8")
            # The suite name is a nonce: a report forged without reading it is refused.
            nonce = f"soda-{secrets.token_hex(8)}"
            env = {
                "PYTEST_ADDOPTS": f"--junit-xml={report} -p no:cacheprovider "
                f"-p soda_probe -o junit_suite_name={nonce}",
                "PYTHONPATH": str(reports),
                "SODA_PROBE_OUT": str(reports / "modules.tsv"),
                "PYTHONDONTWRITEBYTECODE": "1",
            }
        elif kind == "junit":
            assert config.gate.junit is not None
            report = checkout / config.gate.junit
            if report.exists():  # the checkout is clean: only a tracked file is there
                return TestReport(
                    None,
                    False,
                    problem=f"gate.junit names {config.gate.junit}, a file the commit "
                    "tracks; a committed report cannot be trusted",
                )
        elif kind in runners.KINDS:
            ran = runners.invocation(kind, command, reports, config.root)
            command, env, report = ran.command, ran.env, ran.report
            if kind == "go":
                cache_env, mounts = gocache.prepare(
                    config, jail, checkout, config.project.test_command, sealed
                )
                env = {**env, **cache_env}
        result = jail.run(
            command,
            checkout,
            timeout=config.act.command_timeout,
            output_limit=config.act.output_limit,
            extra_env=env,
            writable=[reports],
            sealed=sealed,
            mounts=mounts,
        )
        parsed: Parsed | str | None = None
        if kind in ("pytest", "junit"):
            parsed = parse_junit(report, nonce)
        elif kind != "exit-code":
            parsed = runners.parse(kind, report, root)
        output = runners.output_of(kind, report, result.output, config.act.output_limit)
        foreign = (
            _foreign_imports(reports / "modules.tsv", root, own_modules) if kind == "pytest" else ()
        )
    if isinstance(parsed, Parsed) and kind != "junit":
        parsed = _consistent(parsed, result.returncode, kind)
    if parsed is None or isinstance(parsed, str):
        problem = None if parsed is None else f"no per-test report: {parsed}"
        missing = cannot_import(output, root) if problem and not result.timed_out else None
        if missing is not None:  # the usual cause: say it instead of "not written"
            problem = f"{missing.short()}, so there is no per-test report"
        return TestReport(result.returncode, result.timed_out, output=output, problem=problem)
    unimportable = tuple(
        f"{name} (the tests cannot import it: No module named {name!r})"
        for name in sorted(parsed.missing_modules & own_modules)
    )
    return TestReport(
        returncode=result.returncode,
        timed_out=result.timed_out,
        passed=parsed.passed,
        failed=parsed.failed,
        detailed=True,
        output=output,
        skipped=parsed.skipped,
        foreign_imports=foreign + unimportable,
        failures=parsed.excerpts,
    )


def _consistent(report: Parsed, returncode: int | None, kind: str) -> Parsed | str:
    """The runner's exit code must agree with its report: a run that failed
    needs a failure in the report (a report that claims less failure than the
    exit code is not trusted). pytest: 1 (some failed) and 2 (collection errors,
    reported as errors) need a failure; codes other than 0, 1, 2 and 5 (nothing
    collected) are errors of the run."""
    if kind != "pytest":
        if returncode not in (0, None) and not report.failed:
            return (
                f"the test command exited {returncode} but its report shows no failure "
                "(it did not build, or the report cannot be trusted)"
            )
        return report
    if returncode in (1, 2) and not report.failed:
        return (
            f"pytest exited {returncode} but its report shows no failure; "
            "the report cannot be trusted"
        )
    if returncode not in (0, 1, 2, 5, None):
        return f"pytest exited {returncode} (internal or usage error)"
    return report


def _foreign_imports(path: Path, root: Path, own: frozenset[str]) -> tuple[str, ...]:
    if not path.is_file() or not own:
        return ()
    found = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        name, _, file = line.partition("\t")
        if name.split(".")[0] in own and not Path(file).is_relative_to(root):
            found.append(f"{name} from {file}")
    return tuple(found[:10])
