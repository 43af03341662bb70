"""MCP servers for soda's agents (`[mcp.servers.NAME]`): each started in the
jail, its allowed tools offered beside soda's own, all stopped when the run
that opened them ends.

`open_servers` starts the servers configured for one agent, with the given
directory (a task's worktree, ORIENT's checkout) as the repository, the way a
command runs there (`Jail.wrapper`: no home, no network unless `[sandbox]
network`, its own PID namespace, the environment the jail allows plus the
server's named secrets from soda's environment). soda speaks to each over
stdio through the official MCP SDK's client (the optional `mcp` extra), on an
event loop of its own in one thread; a tool call from the agent's thread waits
for its answer there, at most the server's `call_timeout`. Leaving the block
closes each server's stdin and kills its process tree (bubblewrap takes the
whole PID namespace down with it), then checks by PID that nothing of it is
left. Every start, call and stop is an event (`mcp.start`, `mcp.call`,
`mcp.end`): names, sizes and times, never arguments or secrets.

A server that does not start (a missing program, a crash, no answer within
`start_timeout`) or a secret not in soda's environment is the person's to fix:
`McpServerFailed`, one line naming the server. A call that fails is the model's
business, as any tool's: an error result.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import os
import secrets
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soda.config import Config, McpServer
from soda.errors import UserError
from soda.llm.base import ToolSpec
from soda.system.jail import JAIL_MARK, Jail
from soda.system.proc import scrubbed_env
from soda.system.tree import descendants
from soda.tools.mcp_filter import framed
from soda.tools.offered import offered_name, result_text, sent, strict_schema
from soda.tools.sandbox import ToolError
from soda.tools.toolbox import Tool, Toolbox

if TYPE_CHECKING:
    from mcp.client.session import ClientSession

Emit = Callable[[str, dict[str, Any]], None]
MARK = "SODA_MCP_SERVER"
"""A random token in a server's environment: how soda finds its process by PID."""
STOP_SECONDS = 10.0
"""How long stopping one server may take (the SDK's own escalation is about 6 s)."""
EXTRA = "the MCP SDK is not installed: pip install 'soda-daemon[mcp]' (the mcp extra)"


class McpServerFailed(UserError):
    """A configured MCP server could not be started or asked for its tools; the
    message names it and says why."""


def sdk_missing() -> str | None:
    """Why the MCP client cannot be used here (None: it can)."""
    try:
        import mcp.client.stdio  # noqa: F401
    except ImportError:
        return EXTRA
    return None


@dataclass
class Running:
    """One started server: its session (on the loop), its tools, its process."""

    name: str
    server: McpServer
    token: str
    stop: asyncio.Event
    done: Future[None]
    session: ClientSession | None = None
    tools: list[Any] = field(default_factory=list)
    """The server's `Tool`s, as it listed them."""
    stderr: Any = None


class Servers:
    """The servers opened for one agent run, on one event loop thread."""

    def __init__(self, agent: str, emit: Emit) -> None:
        self.agent = agent
        self.emit = emit
        self.running: list[Running] = []
        self.skipped: dict[str, list[str]] = {}
        """By server, its tools not offered (not allowed, or a name soda cannot offer)."""
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="soda-mcp", daemon=True)
        self.thread.start()

    def start(
        self, name: str, server: McpServer, argv: list[str], env: dict[str, str], cwd: Path
    ) -> None:
        """Start `argv` (the server's command, already in the jail) in `cwd` and list
        its tools."""
        started = time.monotonic()
        token = secrets.token_hex(8)
        ready: Future[None] = Future()
        stop = asyncio.Event()
        running = Running(name, server, token, stop, Future())
        running.stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115 - closed by _stop
        self.running.append(running)
        env = {**env, MARK: token}
        coro = self._own(running, argv, env, cwd, ready)
        running.done = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            ready.result(timeout=server.start_timeout)
        except FutureTimeout:
            raise self._failed(running, f"no answer within {server.start_timeout:g} s") from None
        except Exception as exc:
            raise self._failed(running, _reason(exc)) from None
        self.emit(
            "mcp.start",
            {"server": name, "agent": self.agent, "tools": [s.name for s in self.specs(name)],
             "seconds": round(time.monotonic() - started, 3)},
        )  # fmt: skip

    async def _own(
        self, running: Running, argv: list[str], env: dict[str, str], cwd: Path, ready: Future[None]
    ) -> None:
        """The server's whole life, in one task (the SDK's contexts are entered and
        left in the same task): start, handshake, list, wait for the stop."""
        from mcp.client.session import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client
        from mcp.types import Implementation, PaginatedRequestParams

        params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=cwd)
        try:
            async with stdio_client(params, errlog=running.stderr) as (read, write):
                info = Implementation(name="soda", version=_version())
                async with ClientSession(read, write, client_info=info) as session:
                    await session.initialize()
                    cursor: str | None = None
                    while True:
                        page = await session.list_tools(
                            params=PaginatedRequestParams(cursor=cursor) if cursor else None
                        )
                        running.tools += page.tools
                        cursor = page.next_cursor
                        if not cursor:
                            break
                    running.session = session
                    ready.set_result(None)
                    await running.stop.wait()
        except BaseException as exc:  # said at start, or by the next call
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(str(exc)))
        finally:
            running.session = None

    def _failed(self, running: Running, why: str) -> McpServerFailed:
        self._stop(running, keep_stderr=True)
        tail = _tail(running.stderr)
        return McpServerFailed(
            f"mcp.servers.{running.name}: the server did not start for agent {self.agent}"
            f" ({why}){f'; it said: {tail}' if tail else ''}"
        )

    def specs(self, name: str | None = None) -> list[ToolSpec]:
        return [tool.spec for tool in self.tools(name)]

    def tools(self, name: str | None = None) -> list[Tool]:
        """The tools offered to the agent (of server `name`, or of every one)."""
        found: list[Tool] = []
        for running in self.running:
            if name is not None and running.name != name:
                continue
            skipped = self.skipped.setdefault(running.name, [])
            skipped.clear()
            for tool in running.tools:
                offered = offered_name(running.name, tool.name)
                schema = strict_schema(tool.input_schema)
                if not running.server.allows(tool.name) or offered is None or schema is None:
                    skipped.append(tool.name)
                    continue
                spec = ToolSpec(offered, framed(running.name, tool.name, tool.description), schema)
                found.append(Tool(spec, self._handler(running, tool.name, tool.input_schema)))
        return found

    def _handler(self, running: Running, tool: str, schema: Any) -> Callable[[dict[str, Any]], str]:
        def handle(arguments: dict[str, Any]) -> str:
            return self.call(running, tool, sent(schema, arguments))

        return handle

    def call(self, running: Running, tool: str, arguments: dict[str, Any]) -> str:
        """The text of one tool call's result; ToolError when it failed."""
        session = running.session
        if session is None:
            raise ToolError(f"the MCP server {running.name!r} is no longer running")
        timeout = running.server.call_timeout
        started = time.monotonic()
        future = asyncio.run_coroutine_threadsafe(
            session.call_tool(tool, arguments, read_timeout_seconds=timeout), self.loop
        )
        error: str | None = None
        try:
            result = future.result(timeout=timeout + 5)
            text = result_text(result.content, result.structured_content)
            error = text if result.is_error else None
        except FutureTimeout:
            future.cancel()
            error, text = f"no answer within {timeout:g} s", ""
        except Exception as exc:  # the server's failure is the call's result
            error, text = _reason(exc), ""
        self.emit(
            "mcp.call",
            {"server": running.name, "tool": tool, "agent": self.agent, "chars": len(text),
             "error": error is not None, "seconds": round(time.monotonic() - started, 3)},
        )  # fmt: skip
        if error is not None:
            lines = error.strip().splitlines() or ["failed"]
            raise ToolError(f"{running.name} {tool}: {lines[0]}", "\n".join(lines[1:]))
        return text

    def pids(self) -> list[int]:
        """Host PIDs of every server process and all below it (for the checks)."""
        found: list[int] = []
        for pid in descendants(os.getpid()):
            if any(_has_token(pid, running.token) for running in self.running):
                found += [pid, *descendants(pid)]
        return sorted(set(found))

    def close(self) -> None:
        """Stop every server, then the loop; return once nothing of them is left
        (by PID: what outlives the SDK's escalation is killed); raise nothing."""
        tree = self.pids()
        for running in self.running:
            self._stop(running)
            self.emit("mcp.end", {"server": running.name, "agent": self.agent})
        deadline = time.monotonic() + STOP_SECONDS
        while any(_alive(pid) for pid in tree) and time.monotonic() < deadline:
            for pid in self.pids():  # still carrying a server's mark: still its
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=STOP_SECONDS)
        if not self.thread.is_alive():
            self.loop.close()

    def _stop(self, running: Running, keep_stderr: bool = False) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(running.stop.set)
        with contextlib.suppress(Exception):
            running.done.result(timeout=STOP_SECONDS)
        if running.stderr is not None and not keep_stderr:
            running.stderr.close()
            running.stderr = None


class Beside:
    """An agent's tools with its servers' tools beside them: a call to one of the
    servers' goes to it, any other to the agent's own toolset (the names cannot
    meet: every server's tool starts with `mcp__`)."""

    def __init__(self, own: Any, servers: Servers) -> None:
        self.own = own
        self.theirs = Toolbox(servers.tools())

    @property
    def root(self) -> Path | None:
        return getattr(self.own, "root", None)

    def specs(self) -> list[ToolSpec]:
        return [*self.own.specs(), *self.theirs.specs()]

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        if name in self.theirs.tools:
            return self.theirs.call(name, arguments)
        return self.own.call(name, arguments)


@contextlib.contextmanager
def open_servers(
    config: Config, jail: Jail, agent: str, root: Path, emit: Emit, sealed: bool = False
) -> Iterator[Servers | None]:
    """The servers `config` gives `agent`, started in `jail` with `root` as the
    repository (`sealed`: their writes to it vanish, see `Jail.can_seal`); None
    when it is given none. Stopped when the block ends."""
    configured = config.mcp.for_agent(agent)
    if not configured:
        yield None
        return
    with started(configured, jail, agent, root, emit, sealed) as servers:
        yield servers


@contextlib.contextmanager
def started(
    configured: dict[str, McpServer],
    jail: Jail,
    agent: str,
    root: Path,
    emit: Emit,
    sealed: bool = False,
) -> Iterator[Servers]:
    """The `configured` servers, started for `agent` (see `open_servers`)."""
    missing = sdk_missing()
    if missing is not None:
        raise McpServerFailed(f"mcp.servers: {', '.join(configured)} configured, but {missing}")
    servers = Servers(agent, emit)
    try:
        with contextlib.ExitStack() as stack:
            for name, server in configured.items():
                secrets_ = secret_values(name, server)
                if jail.mode == "none":
                    argv, env = [], scrubbed_env({**secrets_, JAIL_MARK: "1"})
                else:
                    argv = stack.enter_context(jail.wrapper(root, sealed=sealed))
                    env = jail.environment(secrets_)
                servers.start(name, server, [*argv, server.command, *server.args], env, root)
            yield servers
    finally:
        servers.close()


def secret_values(name: str, server: McpServer) -> dict[str, str]:
    """The server's named variables from soda's environment; UserError for one
    that is not set."""
    values: dict[str, str] = {}
    for variable in server.env:
        value = os.environ.get(variable)
        if value is None:
            raise McpServerFailed(
                f"mcp.servers.{name}.env: {variable} is not set in soda's environment"
            )
        values[variable] = value
    return values


def _version() -> str:
    try:
        return importlib.metadata.version("soda-daemon")
    except importlib.metadata.PackageNotFoundError:
        return "0"


def _alive(pid: int) -> bool:
    """Whether `pid` still runs (a zombie waiting for its reaper does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(errors="replace")
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[:1] != ["Z"]


def _has_token(pid: int, token: str) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"{MARK}={token}".encode() in environ.split(b"\0")


def _reason(exc: BaseException) -> str:
    """One line for a failure: the innermost of an exception group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]


def _tail(stream: Any, lines: int = 3) -> str:
    if stream is None:
        return ""
    with contextlib.suppress(OSError, ValueError):
        stream.flush()
        stream.seek(0)
        said = [line.strip() for line in stream.read()[-4000:].splitlines() if line.strip()]
        return " | ".join(said[-lines:])[:500]
    return ""
