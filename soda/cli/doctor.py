"""`soda doctor`: check that everything a run needs is in place, one line each.

Checks run in order and never raise: config, git (repository, base branch),
the test command (its program exists), the jail (it can be made here), what the
gate can see (per-test results or only an exit code), the state database (opens,
migrated), and the provider (what its entry in `soda.llm.providers` says it needs:
a key present; with `ping`, one tiny real request). An unknown provider fails the
config check, as any other error in soda.toml does.
With `tests`, the test command also runs once, in the jail, on a clean checkout
of the base branch's tip, and `imports` says whether the tests imported the
project from that checkout (an install from elsewhere makes the gate refuse
every change).

A check passes, fails, or passes with a warning (`warn`: soda runs, but gives
something up the person should know about).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import git

from soda.config import Config, find_config, load
from soda.errors import SodaError
from soda.gate import import_failure
from soda.gate.imports import cannot_import, import_advice, install_hint
from soda.gate.rules import own_modules
from soda.gate.runner import report_kind, run_tests
from soda.llm import make_model
from soda.llm.base import Message, ModelRequest, ToolSpec, ignore_event
from soda.llm.providers import check_provider, provider_for
from soda.repo.checkouts import Checkouts
from soda.repo.git import open_repo
from soda.store import open_db
from soda.store.db import journal_mode, migration_count
from soda.system.jail import Jail
from soda.system.proc import command_words


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    warn: bool = False
    """Passed, but with something the person should know (never fails the run)."""

    @property
    def label(self) -> str:
        """How the check prints: pass, warn or FAIL."""
        if not self.ok:
            return "FAIL"
        return "warn" if self.warn else "pass"


class Warn(str):
    """A probe's answer that passes with a warning."""


def run_checks(directory: Path, ping: bool = False, tests: bool = False) -> list[Check]:
    """Every check, in order; `tests` adds `imports` (it runs the test suite)."""
    checks: list[Check] = []
    try:
        config = check_provider(load(find_config(directory)))
    except SodaError as exc:
        return [Check("config", False, str(exc).replace("\n", "; "))]
    checks.append(Check("config", True, f"{config.root / 'soda.toml'} is valid"))
    probes: list[tuple[str, Callable[[Config], str]]] = [
        ("git", _git),
        ("tests", _test_command),
        ("jail", _jail),
        ("gate", _gate),
    ]
    if tests:
        probes.append(("imports", _imports))
    probes += [("state", _state), ("provider", lambda c: _provider(c, ping))]
    for name, probe in probes:
        checks.append(_guarded(name, probe, config))
    return checks


def _guarded(name: str, probe: Callable[[Config], str], config: Config) -> Check:
    try:
        detail = probe(config)
        return Check(name, True, detail.replace("\n", "; "), warn=isinstance(detail, Warn))
    except SodaError as exc:
        return Check(name, False, str(exc).replace("\n", "; "))
    except Exception as exc:  # a doctor reports; it does not crash
        return Check(name, False, f"{type(exc).__name__}: {exc}")


def _git(config: Config) -> str:
    repo = open_repo(config.root)
    base = config.project.base_branch
    if base not in {head.name for head in repo.heads}:
        raise SodaError(f"base branch {base!r} does not exist (project.base_branch)")
    return f"repository {repo.working_tree_dir}, base branch {base}"


def _test_command(config: Config) -> str:
    command = config.project.test_command
    words = command_words(command)
    program = words[0] if words else ""
    if program and "/" in program and not os.path.isabs(program):
        # The tests run at the repository's root: `.venv/bin/python` is found there.
        found = shutil.which(str(config.root / program))
        if found is None:
            raise SodaError(f"project.test_command: program {program!r} not found in {config.root}")
        return f"{command!r} ({found})"
    if not program or shutil.which(program, path=os.environ.get("PATH")) is None:
        raise SodaError(f"project.test_command: program {program!r} not found on PATH")
    return f"{command!r} ({shutil.which(program)})"


def _jail(config: Config) -> str:
    jail = Jail.for_config(config, Path(open_repo(config.root).git_dir))
    description = jail.describe()  # raises JailUnavailable with the reason
    return Warn(description) if jail.mode == "none" else description


def _gate(config: Config) -> str:
    kind = report_kind(config)
    if kind == "pytest":
        return "per-test (pytest JUnit, mandatory)"
    if kind == "junit":
        return f"per-test (JUnit at {config.gate.junit})"
    return Warn(
        "exit code only: the test command is not pytest and gate.junit is not set, so the "
        "gate cannot tell which tests fail and merges on exit code 0 alone (weak); set "
        "gate.junit to where your test runner writes a JUnit XML report"
    )


def _imports(config: Config) -> str:
    """Run the tests once on the base branch's tip and check where the project's
    modules came from. A separate worktree: a running soda's pool is untouched."""
    if report_kind(config) != "pytest":
        return Warn("not checked: the import probe is a pytest plugin and the tests are not pytest")
    repo = open_repo(config.root)
    jail = Jail.for_config(config, Path(repo.git_dir))
    jail.ensure_available()
    base = config.project.base_branch
    commit = repo.commit(base).hexsha
    own = own_modules(repo, commit)
    pool = Checkouts(repo, config.state_dir / "worktrees" / f"doctor-{os.getpid()}")
    try:
        report = run_tests(config, jail, pool.view(commit), own)
    finally:
        with contextlib.suppress(git.GitCommandError):
            repo.git.worktree("remove", "--force", str(pool.root / "view"))
        shutil.rmtree(pool.root, ignore_errors=True)
        with contextlib.suppress(git.GitCommandError):
            repo.git.worktree("prune")
    where = f"{base} ({commit[:8]})"
    failure = import_failure(report, config, jail, f"on {where}")
    if failure is not None:  # the same words as the HALT a run would end in
        raise SodaError(failure)
    if report.foreign_imports:
        raise SodaError(
            f"the tests on {where} did not run the checkout's code "
            f"({'; '.join(report.foreign_imports[:3])}), so the gate will refuse every "
            "change. Install the project editable from this repository into the "
            f"environment of `{config.project.test_command}`: "
            f"{install_hint(config.project.test_command, '-e .')}"
        )
    if report.timed_out:
        raise SodaError(f"the tests on {where} timed out (act.command_timeout)")
    if not report.detailed:
        said = [line for line in report.output.splitlines() if line.strip()][-1:]
        raise SodaError(
            f"the tests on {where} ran but {report.problem or 'gave no per-test report'}"
            + (f"; they said: {said[0].strip()[:200]}" if said else "")
        )
    if not report.passed:
        missing = cannot_import(report.output, jail.repo_root)
        if missing is not None:
            return Warn(
                f"{report.summary()} on {where}: no test passes; "
                + import_advice(missing, config.project.test_command, jail.mode != "none")
                + " (unless the spec asks for that module: then this is expected)"
            )
        first = next(iter(sorted(report.failures.items())), ("", ""))
        return Warn(
            f"{report.summary()} on {where}: no test passes, so the gate cannot catch a "
            f"regression; first failure: {first[0]} {first[1]}".strip()
        )
    if not own:
        return f"{report.summary()} on {where}; no project modules found to check"
    modules = ", ".join(sorted(own))
    return f"{report.summary()} on {where}; no project module ({modules}) came from elsewhere"


def _state(config: Config) -> str:
    db = open_db(config.db_path)
    count = migration_count(db)
    mode = journal_mode(db)
    return f"{config.db_path} ({count} migrations, {mode})"


def _provider(config: Config, ping: bool) -> str:
    model_config = config.model
    provider = provider_for(model_config.provider)  # what to check comes from the registry
    if provider.offline is not None:
        return provider.offline(config)
    if provider.needs_key and not os.environ.get(model_config.api_key_env):
        raise SodaError(
            f"{model_config.api_key_env} is not set; export your {provider.label} API key"
        )
    where = model_config.base_url or "default endpoint"
    if not ping:
        return f"{model_config.provider} ({where}); key present; --ping sends one tiny request"
    model = make_model(config, ignore_event)
    answer = ToolSpec(
        "submit",
        "Answer.",
        {
            "type": "object",
            "properties": {"ok": {"type": "boolean"}},
            "required": ["ok"],
            "additionalProperties": False,
        },
    )
    response = model.complete(
        ModelRequest(
            agent="doctor",
            model=model_config.fast,
            system="Reply with ok = true.",
            messages=[Message(role="user", text="ping")],
            tools=[answer],
            answer_tool="submit",
            max_tokens=32,
        )
    )
    return f"{model_config.provider} answered with {response.model} in {response.latency_ms} ms"
