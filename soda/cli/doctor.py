"""`soda doctor`: check that everything a run needs is in place, one line each.

Checks run in order and never raise: config, git (repository, base branch),
the test command (its program exists), the jail (it can be made here), what the
gate can see (per-test results or only an exit code), the state database (opens,
migrated), and the provider (what its entry in `soda.llm.providers` says it needs:
a key present; with `ping`, one tiny real request), each model's price and
where it came from (a FAIL where a run would be refused for want of one), and
the pull requests' forge ([forge]; with `ping`, one request with the token), and
each of `[mcp.servers]` started once in the jail, its tools listed. An unknown
provider fails the config check, as any other error in soda.toml does.
With `tests`, the test command runs once, in the jail, on a clean checkout of the
base branch's tip; `imports` says whether the tests imported the project from that
checkout (an install from elsewhere makes the gate refuse every change).

`fit` weighs the largest first request an agent makes (system prompt, tools, the
spec and room for an iteration's claims, and the answer budget) against its
model's context window (`model.context_window`, soda's table of known models, or
its default). With `ping`, a provider whose server may cut a long prompt
silently (Ollama past its num_ctx) is sent a request of that size, and the
prompt tokens it counts are compared with what was sent.

A check passes, fails, or warns (soda runs, but gives something up: say so).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import git

from soda.agent.condense import CHARS_PER_TOKEN
from soda.agent.definition import Agent, first_message, load_agent, terminal_tools
from soda.agent.executors import check_executors
from soda.agent.limits import Limits, limits_for, request_tokens
from soda.agent.pricing import doctor_line
from soda.cli.doctor_mcp import check_servers  # [mcp.servers]
from soda.config import Config, find_config, load
from soda.config.resources import resource_dir
from soda.errors import MaxTokensTooLarge, PromptTooLong, SodaError
from soda.forge import doctor as forge_doctor
from soda.gate import import_failure, runners
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
from soda.tools import Sandbox, read_only_tools, worktree_tools
from soda.tools.ask import ASK_HUMAN

INPUTS_ALLOWANCE = 1500
"""Tokens allowed, on top of the spec, for what an iteration adds to a first message
(claims, a plan and task, the baseline): a few hundred to 1,000 on real projects."""
ROOMY = 0.5
"""A first request past this share of the window passes with a warning."""


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
    probes += [
        ("state", _state),
        ("provider", lambda c: _provider(c, ping)),
        ("executor", check_executors),
        ("prices", doctor_line),
        ("fit", lambda c: _fit(c, ping)),
        ("forge", lambda c: forge_doctor(c, open_db(c.db_path), ping)),
        *([("mcp", check_servers)] if config.mcp.servers else []),
    ]
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
    if kind in runners.LABELS:
        return f"per-test ({runners.LABELS[kind]}, mandatory)"
    return Warn(
        "exit code only: soda reads no report of this test command (pytest, go test, cargo "
        "test, vitest, jest, mocha, node --test) and gate.junit is not set, so the "
        "gate cannot tell which tests fail and merges on exit code 0 alone (weak); set "
        "gate.junit to where your test runner writes a JUnit XML report"
    )


def _imports(config: Config) -> str:
    """Run the tests once on the base branch's tip and check where the project's
    modules came from. A separate worktree: a running soda's pool is untouched."""
    kind = report_kind(config)
    if kind not in runners.KINDS:
        return Warn("not checked: soda reads no per-test report of this test command")
    repo = open_repo(config.root)
    jail = Jail.for_config(config, Path(repo.git_dir))
    jail.ensure_available()
    base = config.project.base_branch
    commit = repo.commit(base).hexsha
    own = own_modules(repo, commit) if kind == "pytest" else frozenset()
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
    if kind != "pytest":
        return f"{report.summary()} on {where}, read from {runners.LABELS[kind]}"
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
    answer = _ok_tool()
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


@dataclass(frozen=True)
class FirstRequest:
    agent: str
    model: str
    prompt: int
    """Estimated tokens of the request, the inputs' allowance included."""
    limits: Limits

    @property
    def needed(self) -> int:
        return self.prompt + self.limits.answer_tokens

    @property
    def share(self) -> float:
        return self.needed / self.limits.window.tokens


def first_requests(config: Config) -> list[FirstRequest]:
    """Every agent's first request, estimated: system prompt, tools and the spec,
    with INPUTS_ALLOWANCE for the rest of its inputs."""
    spec = config.spec_path.read_text(encoding="utf-8") if config.spec_path.is_file() else ""
    sandbox = Sandbox(config.root)
    reading = [*read_only_tools(sandbox, tests=(_never_run, "")).specs(), ASK_HUMAN]
    jail = Jail(mode="none", repo_root=config.root, git_dir=config.root / ".git")
    working = [*worktree_tools(sandbox, 1.0, 1000, jail=jail).specs(), ASK_HUMAN]
    found = []
    for path in sorted(resource_dir("agents").glob("*.md")):
        if path.stem == "README":
            continue
        agent: Agent[Any] = load_agent(path.stem)
        tools = {"none": [], "read_only": reading, "worktree": working}[agent.tools]
        inputs = {name: spec if name == "spec" else "" for name in agent.inputs}
        message = first_message(agent, inputs)
        limits = limits_for(config, agent.tier, executor=agent.tools == "worktree")
        offered = limits.offered(tools + terminal_tools(agent))
        prompt = request_tokens(agent.system, offered, [message])
        model = config.model.strong if agent.tier == "strong" else config.model.fast
        found.append(FirstRequest(agent.name, model, prompt + INPUTS_ALLOWANCE, limits))
    return found


def _never_run() -> Any:
    raise SodaError("doctor never runs the tests through run_tests")


def _fit(config: Config, ping: bool) -> str:
    """The largest first request against its model's window; with `ping`, a
    probe of that size where the server may cut it silently."""
    largest = max(first_requests(config), key=lambda request: request.share)
    limits, window = largest.limits, largest.limits.window
    said = (
        f"largest first request: {largest.agent}'s, about {largest.prompt:,} tokens (with "
        f"{INPUTS_ALLOWANCE:,} for an iteration's inputs) and {limits.answer_tokens:,} for "
        f"its answer, of a {window.tokens:,}-token window (from {window.source})"
    )
    if largest.needed > window.tokens:
        raise SodaError(
            f"{said}: it does not fit. Give the model a larger window (Ollama: num_ctx; "
            f"vLLM: --max-model-len; llama.cpp: --ctx-size) and set {window.setting}"
        )
    if ping and provider_for(config.model.provider).probes_window:
        said = f"{said}; {_probe_window(config, largest)}"
    elif provider_for(config.model.provider).probes_window and window.setting not in window.source:
        return Warn(
            f"{said}. {window.setting} is not set: make it the window your server gives "
            "the model (a longer prompt is refused, or on Ollama cut silently unless "
            "num_ctx is set); --ping checks"
        )
    if largest.share > ROOMY:
        return Warn(
            f"{said}: little room is left for the conversation; tool results will be "
            f"clipped to {limits.tool_result_chars:,} characters and condensed often"
        )
    return said


def _probe_window(config: Config, largest: FirstRequest) -> str:
    """Send a request the size of the largest first request and check the server
    read it whole (SodaError when it refused it or counted far less)."""
    model = make_model(config, ignore_event)
    answer = _ok_tool()
    system = "Reply by calling submit with ok = true. The rest is filler: ignore it."
    room = max(0, largest.prompt - request_tokens(system, [answer], [])) * CHARS_PER_TOKEN
    filler = f"probe {os.getpid()}: " + "lorem ipsum dolor sit amet " * (room // 27 + 1)
    messages = [Message(role="user", text=filler[:room])]
    sent = request_tokens(system, [answer], messages)
    setting = largest.limits.window.setting
    try:
        response = model.complete(
            ModelRequest(
                agent="doctor",
                model=largest.model,
                system=system,
                messages=messages,
                tools=[answer],
                answer_tool="submit",
                max_tokens=64,
            )
        )
    except (PromptTooLong, MaxTokensTooLarge) as exc:
        raise SodaError(
            f"the server refused a request of about {sent:,} tokens, the size of soda's "
            f"largest first request: the model's window is smaller than {setting} says "
            f"({exc})"
        ) from exc
    counted = response.usage.input_tokens + response.usage.cache_read_tokens
    if 0 < counted * 2 < sent:
        raise SodaError(
            f"the server counted {counted:,} prompt tokens of a request of about {sent:,}: "
            "it cut the prompt silently (Ollama does past its num_ctx). Give the model a "
            "larger window (a Modelfile line PARAMETER num_ctx 32768, or "
            f"OLLAMA_CONTEXT_LENGTH on the server) and set {setting} to match"
        )
    seen = f"counted {counted:,} prompt tokens" if counted else "reported no count"
    return f"the server read a probe of about {sent:,} tokens whole ({seen})"


def _ok_tool() -> ToolSpec:
    return ToolSpec(
        "submit",
        "Answer.",
        {
            "type": "object",
            "properties": {"ok": {"type": "boolean"}},
            "required": ["ok"],
            "additionalProperties": False,
        },
    )
