"""Who does a task's work: the one registry of executors, the only list of their
names.

Each entry says how ACT runs a task with it (`run`, given the task as a `Job`),
whether soda's own tools watched everything it did in the worktree (`watched`:
a tree they watched may be vouched for), and, for an executor that is another
program, its port (`agent.backends.port.Backend`) and the version soda was
tested against (`Pin`). soda's own tool loop is one entry like the others, so
ACT never asks which one it has.

`[executor] backend` and `allowed` are the `ExecutorBackend` Literal of
soda.config (which sits below this room, so pydantic refuses an unknown name
when soda.toml loads: one line, exit 2); the Literal is checked against this
registry on import, as every entry with a program is checked to have its pin.

Adding an executor that is a program: its module in `agent/backends/`
implementing `Backend`, one entry here with its `Pin`, and its name in the
`ExecutorBackend` Literal and the `[executor] backend` docstring.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any, get_args

from soda.agent.backends.claude_code import CLAUDE_CODE
from soda.agent.backends.codex import CODEX
from soda.agent.backends.pins import Pin, check_binary
from soda.agent.backends.port import Backend
from soda.agent.backends.proxy import Emit
from soda.agent.backends.run import run_cli
from soda.agent.definition import closing_line, first_message, load_agent
from soda.agent.quota import wait_until
from soda.agent.runtime import AgentRunner
from soda.agent.turns import Answer, Toolset
from soda.config import Config, ExecutorConfig
from soda.config.sections import ExecutorBackend
from soda.contracts import ExecuteResult
from soda.errors import ConfigError, CredentialsError, TransientError, UserError
from soda.llm.base import Message
from soda.repo.workspace import Workspace
from soda.system.jail import Jail

SUMMARY_CHARS = 2000


@dataclass(frozen=True)
class Job:
    """One task as an executor receives it from ACT."""

    config: Config
    jail: Jail
    workspace: Workspace
    title: str
    inputs: dict[str, Any]
    """The executor agent's inputs (`soda.loop.act.brief`)."""
    tools: Toolset
    """The worktree's tools, for soda's own tool loop."""
    resume: list[Message] | None
    """The conversation to resume after a person answered its question."""
    runner: AgentRunner
    record: Any
    """ACT's call recorder (behind its lock): a program's calls go there too."""
    emit: Emit
    """The task's events."""
    should_stop: Callable[[], bool]


@dataclass(frozen=True)
class Executor:
    """One executor: how ACT runs a task with it, and what it needs."""

    name: str
    """The `[executor] backend` value that chooses it."""
    run: Callable[[Job], Answer[ExecuteResult]]
    watched: bool
    """soda's tools watched all it did in the worktree (else it ran commands of
    its own: the tree is not vouched for)."""
    label: str
    backend: Backend | None = None
    """Its port, when it is another program."""
    pin: Pin | None = None
    """The version of that program soda was tested against."""


def _tool_loop(job: Job) -> Answer[ExecuteResult]:
    agent = load_agent("executor", ExecuteResult)
    return job.runner.run(agent, job.inputs, job.tools, resume=job.resume)


def cli_prompt(inputs: dict[str, Any]) -> str:
    """The brief for a CLI, then the built-in executor's first message without its
    closing line (which names tools the CLI does not have)."""
    agent = load_agent("executor", ExecuteResult)
    body = first_message(agent, inputs).text.removesuffix(closing_line(agent))
    brief = resources.files("soda.agent.backends").joinpath("brief.md").read_text("utf-8")
    return brief + body.rstrip() + "\n"


def program(backend: Backend, pin: Pin, label: str) -> Executor:
    """The entry of a coding CLI run in the jail behind the egress proxy."""

    def run(job: Job) -> Answer[ExecuteResult]:
        return _cli_answer(backend, pin, job)

    return Executor(backend.name, run, watched=False, label=label, backend=backend, pin=pin)


EXECUTORS: dict[str, Executor] = {
    executor.name: executor
    for executor in (
        Executor("builtin", _tool_loop, watched=True, label="soda's own tool loop"),
        program(
            CLAUDE_CODE, Pin("claude-code", "@anthropic-ai/claude-code", "2.1.330", "claude"),
            "Claude Code",
        ),
        program(CODEX, Pin("codex", "@openai/codex", "0.169.0", "codex"), "Codex CLI"),
    )
}  # fmt: skip
PINS: dict[str, Pin] = {name: e.pin for name, e in EXECUTORS.items() if e.pin is not None}
"""The programs soda installs (`soda tools install NAME`), by executor name."""


def executor_for(name: str) -> Executor:
    """The registry's entry for `name`; ConfigError naming the key and the known names."""
    executor = EXECUTORS.get(name)
    if executor is None:
        known = ", ".join(EXECUTORS)
        raise ConfigError(
            f"soda.toml: executor.backend: unknown executor {name!r} (known: {known})"
        )
    return executor


def pins_for(names: list[str]) -> list[Pin]:
    """The pins of the programs `names` (`soda tools install`); UserError for a
    name that is no program soda installs."""
    known = ", ".join(PINS)
    if not names:
        raise UserError(f"soda tools install: name a tool ({known})")
    unknown = [name for name in names if name not in PINS]
    if unknown:
        raise UserError(f"soda tools install: unknown tool {unknown[0]!r} (known: {known})")
    return [PINS[name] for name in names]


def check_executors(config: Config) -> str:
    """`soda doctor`'s check of the programs the config may use as executors:
    each binary at its pinned version, and its API key present (outside the jail)."""
    chosen = config.executor
    programs = [
        executor_for(name) for name in sorted({chosen.backend, *chosen.allowed})
        if executor_for(name).pin is not None
    ]  # fmt: skip
    if not programs:
        return ", ".join(f"{e.name} ({e.label})" for e in map(executor_for, [chosen.backend]))
    lines = []
    for executor in programs:
        assert executor.pin is not None and executor.backend is not None  # checked on import
        command = chosen.command if executor.name == chosen.backend else None
        lines.append(check_binary(executor.pin, command))
        _, key_env = executor.backend.route(config)
        if not os.environ.get(key_env):
            raise CredentialsError(
                f"{executor.name}: no API key in the environment variable {key_env}"
            )
    return "; ".join(lines)


def _cli_answer(backend: Backend, pin: Pin, job: Job) -> Answer[ExecuteResult]:
    """Run `backend` on the task's worktree; its answer as the built-in executor's.

    A spent budget ends the task as the built-in executor's would; a provider's
    rate limit spent until a known time is waited out (no call, on the runner's
    clock), then the task runs again on its worktree; a provider that kept failing
    is a transient failure; a cancel or stop is Interrupted; a CLI that
    failed and left no change gave up (a failed attempt: smart retry); a CLI that
    changed files goes to the gate with its final text as the summary, even when it
    reported an error (the gate, not the CLI, says whether work lands)."""
    name, record, ws = backend.name, job.record, job.workspace
    agent = f"executor:{name}"
    record.event("agent.start", {"agent": agent, "tier": "cli", "model": name})
    ending, turns = "error", 0
    try:
        while True:
            outcome = run_cli(
                backend, pin, job.config, job.jail, ws.path, cli_prompt(job.inputs), record,
                job.emit, job.should_stop,
            )  # fmt: skip
            if outcome.limited_until is None or outcome.budget is not None:
                break
            # The provider's limit is spent: no call until it resets, then the same
            # task again on the same worktree (what the CLI did so far is there).
            why = f"{name}: the provider's rate limit is spent ({outcome.failed})"
            clock = job.runner.clock
            wait_until(outcome.limited_until, why, agent, clock, job.should_stop, record.event)
        ending, turns = ("gave_up" if outcome.failed else "answered"), outcome.calls
    finally:  # the live view's frame around the CLI's turns, as for any agent
        record.event("agent.end", {"agent": agent, "turns": turns, "outcome": ending})
    if outcome.budget is not None:
        raise outcome.budget
    if outcome.transient:
        raise TransientError(f"{name} executor: {outcome.transient}")
    steps = len(outcome.transcript.steps)
    if outcome.failed and not (ws.head() != ws.fork_point or ws.dirty()):
        return Answer(output=None, gave_up=f"{name}: {outcome.failed}", turns=steps)
    summary = outcome.summary or f"{job.title} (done by {name}, which gave no summary)"
    if outcome.failed:
        summary += f"\n\n({name} reported: {outcome.failed})"
    result = ExecuteResult(
        tasks_blocked=[], task_comments=[], new_subtasks=[], learnings=[],
        summary=summary[:SUMMARY_CHARS],
    )  # fmt: skip
    return Answer(output=result, gave_up=None, turns=steps)


def _check_registry() -> None:
    """The config's Literal names exactly the registry; every program has its pin
    (for its own name) and its name in the `[executor] backend` docstring."""
    literal, names = set(get_args(ExecutorBackend)), set(EXECUTORS)
    if literal != names:
        raise RuntimeError(f"ExecutorBackend out of step with EXECUTORS: {literal ^ names}")
    described = ExecutorConfig.model_fields["backend"].description or ""
    for name, executor in EXECUTORS.items():
        if (executor.backend is None) != (executor.pin is None):
            raise RuntimeError(f"executor {name!r}: a program needs both its port and its pin")
        if executor.backend is not None and executor.backend.name != name:
            raise RuntimeError(f"executor {name!r} runs the backend {executor.backend.name!r}")
        if executor.pin is not None and executor.pin.tool != name:
            raise RuntimeError(f"executor {name!r} has the pin of {executor.pin.tool!r}")
        if f'"{name}"' not in described:
            raise RuntimeError(f"executor {name!r} missing from the [executor] backend docstring")


_check_registry()
