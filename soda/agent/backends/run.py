"""One task done by a coding CLI: the proxy up, the CLI in the jail under its
watchdogs, its events read into a transcript, and an honest ending.

    proxy     EgressProxy on a unix socket in a private directory (the real key)
    jail      the directory bound read-only into the jail; the launcher there
              forwards the jail's loopback to it and starts the CLI with the
              placeholder key and a private home (a tmpfs: nothing outlives it)
    watch     deadline, idle limit, grace after the final result; a spent
              budget or a failing API ends it too (`soda.system.watched`)
    ending    the CLI's own account (`is_error`, `turn.failed`) beats its exit
              code; `CliOutcome` says what happened, ACT decides what it means

The worktree's diff is the work: soda commits it outside the jail and gates it
like any other.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from soda.agent.backends.pins import Pin, find_binary
from soda.agent.backends.port import Backend, Launch, Transcript
from soda.agent.backends.proxy import EgressProxy, Emit, Record
from soda.config import Config
from soda.errors import BudgetExhausted, CredentialsError, Interrupted
from soda.system.jail import Jail
from soda.system.watched import WatchLimits, run_watched
from soda.tools.servers import secret_values

JAIL_HOME = "/tmp/soda-home"
"""The CLI's home inside the jail: in the jail's private /tmp, empty at the start."""
PREVIEW = 300
"""Characters of a step kept in its event."""
STEP_EVENTS = {"said": "executor.said", "tool": "executor.tool"}
"""The event of each kind of step the CLI reports."""


@dataclass
class CliOutcome:
    """How one CLI run ended."""

    summary: str
    """Its final text ("" when it gave none)."""
    failed: str = ""
    """Why the run failed ("" when it answered)."""
    transient: str = ""
    """Set when the provider kept failing: a transient failure, not the task's."""
    budget: BudgetExhausted | None = None
    transcript: Transcript = field(default_factory=Transcript)
    duration_s: float = 0.0
    calls: int = 0
    """Model calls the proxy forwarded and recorded."""
    limited_until: float | None = None
    """The provider's rate limit ended the run: it resets then (seconds since the
    epoch), by the proxy's reading of a 429 or the CLI's own report."""


def backend_for(config: Config, hints: list[str]) -> str:
    """The executor of one task: a hint `executor:NAME` the planner gave, when
    `[executor] allowed` lists it, else `[executor] backend`."""
    for hint in hints:
        name = hint.strip().removeprefix("executor:")
        if hint.strip().startswith("executor:") and name in config.executor.allowed:
            return name
    return config.executor.backend


def run_cli(
    backend: Backend,
    pin: Pin,
    config: Config,
    jail: Jail,
    worktree: Path,
    prompt: str,
    record: Record,
    emit: Emit,
    should_stop: Callable[[], bool] = lambda: False,
) -> CliOutcome:
    """Run `backend` (its binary at `pin`) on `worktree` with `prompt`; raises
    CredentialsError when the key is missing and Interrupted when a stop or
    cancel ended it."""
    name = backend.name
    route, key_env = backend.route(config)
    key = os.environ.get(key_env)
    if not key:
        raise CredentialsError(
            f"[executor] backend = {name!r} needs an API key in the environment variable "
            f"{key_env} (read by soda outside the jail; set [executor] api_key_env to use another)"
        )
    binary = find_binary(pin, config.executor.command if name == config.executor.backend else None)
    limits = config.executor
    proxy = EgressProxy(
        route, key, f"executor:{name}", record, emit,
        read_timeout=config.model.read_timeout, max_failures=limits.api_failures,
        limit_after=config.model.max_retry_wait,
    ).start()  # fmt: skip
    transcript = Transcript()
    try:
        launcher = proxy.directory / "launcher.py"
        source = resources.files("soda.agent.backends").joinpath("launcher.py")
        launcher.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
        home = JAIL_HOME if jail.mode != "none" else str(proxy.directory / "home")
        templates = [f"{k}={v}" for k, v in backend.environment(home).items()]
        servers, secrets = cli_servers(config, proxy.directory)
        options = backend.mcp_options(servers, proxy.directory)
        command = backend.command(str(binary), prompt, backend.model(config), options)
        argv = [sys.executable, "-I", str(launcher), str(proxy.socket_path), *templates, "--"]
        confined = dataclasses.replace(
            jail, expose=(*jail.expose, proxy.directory, *_outside(binary, jail))
        )
        emit("executor.start", {"backend": name, "binary": str(binary)})

        def on_line(line: str) -> bool:
            return _read(backend, line, transcript, emit, name)

        def stop() -> str | None:
            return proxy.stop_reason() or ("cancelled" if should_stop() else None)

        with confined.wrapper(worktree) as prefix:
            watched = run_watched(
                [*prefix, *argv, *command],
                worktree,
                confined.environment(secrets),
                on_line,
                WatchLimits(limits.task_timeout, limits.idle_timeout, limits.result_grace),
                stop,
                label=f"{name} executor",
            )
    finally:
        proxy.close()
    outcome = _ending(transcript, watched.killed, watched.returncode, watched.stderr)
    outcome.duration_s, outcome.calls = watched.duration_s, proxy.calls
    outcome.budget = proxy.budget
    outcome.transient = proxy.failing
    said = [at for at in (proxy.limited_until, transcript.limited_until) if at is not None]
    outcome.limited_until = max(said) if said else None
    if watched.killed == "cancelled":
        raise Interrupted(f"{name} executor stopped: cancelled")
    emit(
        "executor.end",
        {"backend": name, "failed": outcome.failed[:PREVIEW], "killed": watched.killed,
         "exit_code": watched.returncode, "calls": proxy.calls, "refused": len(proxy.refused),
         "seconds": watched.duration_s},
    )  # fmt: skip
    return outcome


def cli_servers(config: Config, directory: Path) -> tuple[dict[str, Launch], dict[str, str]]:
    """The executor's `[mcp.servers]` as a CLI starts them: each through soda's
    filter (`soda/tools/mcp_filter.py`, copied into `directory`: the allow-list, framed
    descriptions, results cut to the tool-result limit), and the secrets they
    name, from soda's environment, for the CLI's."""
    configured = config.mcp.for_agent("executor")
    if not configured:
        return {}, {}
    script = directory / "mcp_filter.py"
    source = resources.files("soda.tools").joinpath("mcp_filter.py")
    script.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    servers, secrets = {}, {}
    for name, server in configured.items():
        secrets.update(secret_values(name, server))
        spec = {"server": name, "tools": server.tools,
                "result_chars": config.context.tool_result_chars}  # fmt: skip
        args = ["-I", str(script), json.dumps(spec), "--", server.command, *server.args]
        servers[name] = Launch(sys.executable, args, list(server.env))
    return servers, secrets


def _ending(transcript: Transcript, killed: str, code: int | None, stderr: str) -> CliOutcome:
    """The CLI's own account first (`is_error`, `turn.failed`), then the watchdog's,
    then the exit code."""
    summary = (transcript.result or "").strip()
    out = CliOutcome(summary=summary, transcript=transcript)
    if transcript.failed:
        out.failed = transcript.failed
    elif killed and not (transcript.done and "final result" in killed):
        out.failed = f"killed: {killed}"
    elif not transcript.done:
        tail = " | ".join(stderr.strip().splitlines()[-3:])
        out.failed = f"ended (exit code {code}) without a final result" + (
            f": {tail}" if tail else ""
        )
    elif code not in (0, None):
        out.failed = f"exit code {code} after its result"
    return out


def _read(backend: Backend, line: str, transcript: Transcript, emit: Emit, name: str) -> bool:
    """One stdout line: an event into the transcript (and soda's events); True once
    the CLI has said its final word."""
    try:
        event = json.loads(line)
    except ValueError:
        return False  # a warning printed between events
    if not isinstance(event, dict):
        return False
    transcript.events += 1
    for step in backend.read(event, transcript):
        emit(STEP_EVENTS[step.kind], {"backend": name, "text": step.text[:PREVIEW]})
    return transcript.done


def _outside(binary: Path, jail: Jail) -> list[Path]:
    """The CLI's package (its `node_modules`, else its directory), when it lives
    where the jail hides (the home, /tmp, /run): bound read-only, nothing else."""
    real = Path(os.path.realpath(binary))
    hidden = (jail.home, Path("/tmp"), Path("/var/tmp"), Path("/run"), *jail.hidden)
    if not any(real.is_relative_to(place) for place in hidden):
        return []
    found = [next((p for p in real.parents if p.name == "node_modules"), real.parent)]
    if Path(binary).parent != real.parent:  # a link elsewhere: its own directory too
        found.append(Path(os.path.realpath(Path(binary).parent)))
    return found
