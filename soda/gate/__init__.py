"""The gate's services, shared by ACT (baseline, the merge gate) and DECIDE
(DONE is confirmed by the tests), on the pool's clean checkouts (soda.repo.checkouts):

    runner.py   run the test command in the jail, read its per-test report
                (runners.py, reports.py, libtest.py: every runner's; gocache.py:
                Go's build cache kept between runs)
    rules.py    what must hold before a commit merges (gate, infrastructure_changes),
                and the same rules as agents are told them (held_changes); the
                other runners' configuration in runner_config.py
    targets.py  target tests found in a run's per-test results: a task's (the
                merge needs them passing) and the spec's criteria's (DONE's proof)
    imports.py  a run that could not import something: the module, the fix
    here        `tested`: results cached by tree id; the milestone tip's tests;
                `confirm_done`; `import_failure`

May import: config, contracts, errors, events, repo, store, system.
"""

from __future__ import annotations

import contextlib
import hashlib

from sqlite_utils import Database

from soda.config import Config
from soda.events import Events
from soda.gate.imports import cannot_import, import_advice
from soda.gate.rules import own_modules
from soda.gate.runner import TestReport, report_kind, run_tests
from soda.gate.targets import listing, proof
from soda.repo.checkouts import Checkouts
from soda.repo.refs import branch_head, tree_of
from soda.store import test_results
from soda.system.jail import Jail


def setup_key(config: Config, jail: Jail) -> str:
    """Everything besides the tree that decides a test run's result: the command,
    the report, the jail, and the environment the tests import from (what is
    bound and exposed, and when those directories last changed: reinstalling the
    project there gives a new key)."""
    parts = [
        config.project.test_command,
        report_kind(config),
        config.gate.junit or "",
        jail.mode,
        str(jail.network),
        *map(str, jail.expose),
        *jail.bind_ignored,
        *_environment_stamps(jail),
    ]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _environment_stamps(jail: Jail) -> list[str]:
    dirs = [jail.repo_root / name for name in jail.bind_ignored] + list(jail.expose)
    stamps = []
    for directory in dirs:
        for path in (directory, *directory.glob("lib/python*/site-packages")):
            with contextlib.suppress(OSError):
                stamps.append(f"{path}:{path.stat().st_mtime_ns}")
    return stamps


def tested(
    config: Config, jail: Jail, db: Database, checkouts: Checkouts, commit: str
) -> tuple[TestReport, bool]:
    """The test results of `commit` on a clean checkout, from the cache when its
    tree was tested before; the flag says whether they were cached."""
    repo = checkouts.repo
    tree = tree_of(repo, commit)
    setup = setup_key(config, jail)
    hit = test_results.cached(db, tree, setup)
    if hit is not None:
        return TestReport.from_json(hit), True
    # A sealed run (its writes vanish with the jail) leaves the checkout clean:
    # the pool goes on vouching for it, so ORIENT reads it next without a reset
    # or a clean. A junit report is read from the checkout: never sealed.
    checkouts.root.mkdir(parents=True, exist_ok=True)
    sealed = report_kind(config) != "junit" and jail.can_seal(checkouts.root)
    # Only pytest runs report which modules they imported (see soda.gate.runner).
    own = own_modules(repo, commit) if report_kind(config) == "pytest" else frozenset()
    # The checkout is held while the tests run: no task takes it meanwhile.
    with checkouts.viewing(commit, run=not sealed) as path:
        report = run_tests(config, jail, path, own, sealed=sealed)
    if sealed and _overlay_refused(report):  # run again on the checkout itself
        with checkouts.viewing(commit, run=True) as path:
            report = run_tests(config, jail, path, own)
    # A run that could not be judged is not remembered: its cause is usually the
    # environment, which the person fixes without changing the tree.
    if not (report.timed_out or report.problem or report.foreign_imports):
        test_results.store(db, tree, setup, commit, report.summary(), report.to_json())
    return report, False


def _overlay_refused(report: TestReport) -> bool:
    """Whether a sealed run may have failed for the overlay's sake: overlayfs
    refuses to rename a directory of the lower layer in place (EXDEV, "Invalid
    cross-device link"), which a checkout of its own allows. Such a run is not
    trusted; the tests run again unsealed."""
    if report.returncode == 0 and not report.failed:
        return False
    text = "\n".join([report.output, *report.failures.values()]).lower()
    return "cross-device link" in text or "exdev" in text


def milestone_tests(
    config: Config, jail: Jail, db: Database, checkouts: Checkouts, branch: str
) -> TestReport:
    """The tests of `branch`'s tip (the milestone's) on a clean checkout (cached by tree id)."""
    tip = branch_head(checkouts.repo, branch)
    report, _ = tested(config, jail, db, checkouts, tip)
    return report


def confirm_done(
    config: Config, jail: Jail, db: Database, checkouts: Checkouts, branch: str, events: Events
) -> str | None:
    """Before DONE is recorded: the milestone tip's tests, on a clean checkout,
    must pass, and so must every test the spec's acceptance criteria name (one
    that is not found or skipped refuses too). None when they do, else the
    reason DONE is refused. Event `done.tests` records the run's summary and,
    with a per-test report, which tests prove each criterion (`proof`: where
    the spec ties a criterion to tests; the iteration's report shows it)."""
    jail.ensure_available()
    report = milestone_tests(config, jail, db, checkouts, branch)
    criteria = proof(report, _spec_text(config)) if report.detailed else []
    events.emit(
        "done.tests",
        {"summary": report.summary(), "proof": [entry.to_json() for entry in criteria]},
    )
    if report.timed_out:
        return "DONE refused: the tests time out on the milestone tip"
    if report.detailed and report.failed:
        firsts = {
            name: (text.splitlines() or ["failed"])[0] for name, text in report.failures.items()
        }
        shown = "; ".join(
            f"{name}: {firsts.get(name, 'failed')}" for name in sorted(report.failed)[:5]
        )
        return f"DONE refused: {len(report.failed)} test(s) fail on the milestone tip: {shown}"
    if not report.detailed and report.returncode != 0:
        why = report.problem or f"the test command exits {report.returncode}"
        return f"DONE refused: {why} on the milestone tip"
    unproven = list(
        {r.target: r for entry in criteria for r in entry.tests if not r.passed}.values()
    )
    if unproven:
        return (
            "DONE refused: tests the spec's acceptance criteria name do not pass on the "
            f"milestone tip: {listing(unproven)}"
        )
    return None


def _spec_text(config: Config) -> str:
    """The spec as the person wrote it ("" when it cannot be read: no criteria)."""
    try:
        return config.spec_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def import_failure(report: TestReport, config: Config, jail: Jail, what: str) -> str | None:
    """When `report` is a run with no per-test report because the tests could not
    import something (the project, pytest, a dependency): one message naming the
    module, the command and where it ran, and the fix; else None. `what` says
    which run, e.g. "on the milestone tip"."""
    if not report.problem or report.timed_out:
        return None
    missing = cannot_import(report.output, jail.repo_root)
    if missing is None:
        return None
    return import_advice(missing, config.project.test_command, jail.mode != "none", what)
