"""`[mcp.servers]`: a project's MCP servers for soda's agents, each run in the jail.

A real stdio server (tests/mcp_stdio_server.py, run with this venv's python in
the real jail) is started through the MCP SDK's client. Its tools are offered,
under soda's names, to the agents the config names and to no other; its calls
run in the jail (the person's home is empty, 127.0.0.1 is the jail's own unless
`[sandbox] network`); a 10 MB result reaches the model cut to the tool-result
limit; a description that gives orders changes nothing soda offers; and when
the agent's run ends nothing of the server is left, by PID. The model is the
only fake (FunctionModel).
"""

from __future__ import annotations

import http.server
import json
import os
import socketserver
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest

from soda.agent.definition import load_agent
from soda.agent.recorder import CallRecorder
from soda.agent.runtime import AgentRunner
from soda.cli.doctor import run_checks
from soda.config import Config, ContextConfig, McpConfig, McpServer, ModelConfig, load
from soda.config.mcp import ToolAgent
from soda.config.resources import resource_dir
from soda.errors import ConfigError
from soda.events import Events
from soda.llm.base import ModelRequest
from soda.llm.function import FunctionModel, call, first_turn, last_results, submit
from soda.store import open_db
from soda.system.jail import Jail
from soda.system.tree import descendants
from soda.tools import Sandbox, read_only_tools
from soda.tools.mcp_filter import DESCRIPTION_CHARS
from soda.tools.servers import MARK, McpServerFailed, Servers, open_servers, started
from tests.conftest import git

TESTS = Path(__file__).resolve().parent
SERVER = TESTS / "mcp_stdio_server.py"
ALLOWED = ["read_file", "fetch", "flood", "spawn", "env", "write_file", "obey"]
SECRET = "mcp-secret-value-41f3"
INPUTS = {"spec": "# S", "claims": {}, "verification": "ok"}
ASSESSED = {"spec_satisfied": False, "confidence": "high", "gaps": [], "summary": "seen"}


def probe(*args: str, agents: list[str] | None = None, **extra: Any) -> McpServer:
    return McpServer.model_validate(
        {
            "command": sys.executable,
            "args": [str(SERVER), *args],
            "agents": agents or ["assessor"],
            "tools": ALLOWED,
            "env": ["PROBE_SECRET"],
            **extra,
        }
    )


def config_with(server: McpServer, **sections: Any) -> Config:
    return Config(mcp=McpConfig(servers={"probe": server}), **sections)


def jail_for(root: Path, network: bool = False) -> Jail:
    """A bwrap jail for `root` that shows this interpreter and the server's file."""
    expose = (TESTS, Path(sys.prefix), Path(sys.base_prefix))
    return Jail("bwrap", root, root / ".git", expose=expose, network=network)


def server_pids() -> list[int]:
    """Host PIDs of every MCP server soda started from this process, and all below them."""
    found: list[int] = []
    for pid in descendants(os.getpid()):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if f"{MARK}=".encode() in environ:
            found += [pid, *descendants(pid)]
    return sorted(set(found))


def alive(pid: int) -> bool:
    """A process that still runs (a zombie waiting for its reaper does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository the servers run in, with a file planted in the person's home."""
    path = tmp_path_factory.mktemp("mcp") / "repo"
    path.mkdir()
    git(path, "init", "-q")
    return path


@pytest.fixture(scope="module")
def planted() -> Iterator[Path]:
    home_file = Path.home() / f".soda-mcp-test-{os.getpid()}"
    home_file.write_text("the person's secret\n")
    yield home_file
    home_file.unlink()


@pytest.fixture(scope="module", autouse=True)
def _secret() -> Iterator[None]:
    """The secret the probe server's config names, in soda's environment."""
    os.environ["PROBE_SECRET"] = SECRET
    yield
    del os.environ["PROBE_SECRET"]


@pytest.fixture(scope="module")
def servers(root: Path) -> Iterator[tuple[Servers, list[tuple[str, dict[str, Any]]]]]:
    """One server, shared: started for the assessor, in the jail, network off."""
    events: list[tuple[str, dict[str, Any]]] = []
    config = config_with(probe())
    emit = lambda kind, data: events.append((kind, data))  # noqa: E731
    with open_servers(config, jail_for(root), "assessor", root, emit) as opened:
        assert opened is not None
        yield opened, events


def tool(servers: Servers, name: str) -> Any:
    return next(t for t in servers.tools() if t.spec.name == f"mcp__probe__{name}")


class Listening:
    """An HTTP server on 127.0.0.1 (the host's loopback), answering every GET."""

    def __enter__(self) -> int:
        class Hello(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"hello from the host")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = socketserver.TCPServer(("127.0.0.1", 0), Hello)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return int(self.server.server_address[1])

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_the_allowed_tools_are_offered_under_soda_names(servers) -> None:
    opened, events = servers
    names = [spec.name for spec in opened.specs()]
    assert names == [f"mcp__probe__{name}" for name in ALLOWED]  # both pages, in order
    assert opened.skipped == {"probe": ["forbidden"]}
    schema = tool(opened, "write_file").spec.input_schema
    assert schema["required"] == ["path", "text"]  # strict: all required, optional nullable
    assert schema["properties"]["text"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert "minLength" not in json.dumps(schema)
    start = next(data for kind, data in events if kind == "mcp.start")
    assert start["server"] == "probe" and start["agent"] == "assessor"


def test_the_call_runs_in_the_jail_without_home_or_network(servers, planted: Path) -> None:
    opened, _ = servers
    read = tool(opened, "read_file").handler
    assert "No such file" in _refused(lambda: read({"path": str(planted)}))
    with Listening() as port:
        refused = _refused(lambda: tool(opened, "fetch").handler({"port": port}))
    assert "Connection refused" in refused
    assert tool(opened, "env").handler({"name": "PROBE_SECRET"}) == SECRET  # named: passed


def test_with_network_allowed_the_host_is_reachable(root: Path) -> None:
    config = config_with(probe(env=[]))
    with (
        Listening() as port,
        started(
            config.mcp.servers, jail_for(root, network=True), "assessor", root, lambda *a: None
        ) as opened,
    ):
        answer = tool(opened, "fetch").handler({"port": port})
    assert "hello from the host" in answer


def test_a_ten_megabyte_result_reaches_the_model_cut_to_the_limit(servers, tmp_path) -> None:
    opened, _ = servers
    seen: list[str] = []

    def answer(request: ModelRequest) -> dict[str, Any]:
        if first_turn(request):
            return call("mcp__probe__flood", chars=10_000_000)
        seen.extend(last_results(request))
        return submit(ASSESSED)

    config = Config(context=ContextConfig(tool_result_chars=5_000))
    runner = _runner(tmp_path, FunctionModel(answer), config)
    from soda.tools.servers import Beside

    runner.run(load_agent("assessor"), INPUTS, Beside(read_only_tools(Sandbox(tmp_path)), opened))
    assert len(seen) == 1 and 5_000 <= len(seen[0]) < 5_400
    assert "9,995,000 of 10,000,000 characters cut" not in seen[0]  # kept 1 MB at the client
    assert "characters cut here" in seen[0]


def test_an_injected_description_changes_no_permission(servers, planted: Path) -> None:
    opened, _ = servers
    obey = tool(opened, "obey").spec
    assert obey.description.startswith("Tool 'obey' of the MCP server 'probe'")
    assert "untrusted" in obey.description and "grants no permission" in obey.description
    assert len(obey.description) < DESCRIPTION_CHARS + 250
    before = [spec.name for spec in opened.specs()]
    from soda.tools.servers import Beside

    toolbox = Beside(read_only_tools(Sandbox(planted.parent)), opened)
    assert toolbox.call("mcp__probe__obey", {"note": "obeying"}).content == "obey ran"
    # What the description claims is granted is not: the tool is neither offered
    # nor callable, the jail is unchanged, the tool list is the same.
    refused = toolbox.call("mcp__probe__forbidden", {})
    assert refused.is_error and "unknown tool" in refused.content
    assert "No such file" in _refused(
        lambda: tool(opened, "read_file").handler({"path": str(planted)})
    )
    assert [spec.name for spec in opened.specs()] == before


def test_offered_to_the_named_agent_only_and_gone_by_pid_when_its_run_ends(
    root: Path, tmp_path: Path
) -> None:
    offered: dict[str, list[str]] = {}
    during: list[int] = []
    others = set(server_pids())  # the shared server's

    def answer(request: ModelRequest) -> dict[str, Any]:
        offered[request.agent] = [t.name for t in request.tools if t.name.startswith("mcp__")]
        if request.agent == "verifier":
            verified = {"checks": [], "task_updates": [], "learnings": []}
            return submit({**verified, "summary": "ok", "learning_verdicts": []})
        if first_turn(request):
            return call("mcp__probe__spawn")  # a process that leaves the server's session
        during.extend(pid for pid in server_pids() if pid not in others)
        return submit(ASSESSED)

    runner = _runner(tmp_path, FunctionModel(answer), config_with(probe()))
    runner.jail = lambda: jail_for(root)
    tools = read_only_tools(Sandbox(root))
    verifier_inputs = {"spec": "# S", "claims": {}, "tests_and_merges": "pytest"}
    runner.run(load_agent("verifier"), verifier_inputs, tools)
    runner.run(load_agent("assessor"), INPUTS, tools)
    assert offered["verifier"] == []
    assert offered["assessor"] == [f"mcp__probe__{name}" for name in ALLOWED]
    assert len(during) >= 3  # bwrap, the server, the sleep it spawned
    assert [pid for pid in during if alive(pid)] == []
    kinds = [row["kind"] for row in runner.record.db["events"].rows]  # type: ignore[attr-defined]
    assert [k for k in kinds if k.startswith("mcp.")] == ["mcp.start", "mcp.call", "mcp.end"]
    stored = json.dumps(list(runner.record.db["events"].rows))  # type: ignore[attr-defined]
    assert SECRET not in stored


def test_a_server_that_does_not_start_is_one_line_naming_it(root: Path) -> None:
    others = set(server_pids())  # the shared server's
    config = config_with(probe("--crash", env=[]))
    opening = open_servers(config, jail_for(root), "assessor", root, lambda *a: None)
    with pytest.raises(McpServerFailed) as failed, opening:
        pass
    message = str(failed.value)
    assert message.startswith("mcp.servers.probe: the server did not start for agent assessor")
    assert "refusing to start (--crash)" in message and "\n" not in message
    assert [pid for pid in server_pids() if pid not in others] == []


def test_a_secret_missing_from_the_environment_names_the_key(root: Path) -> None:
    config = config_with(probe(env=["SODA_TEST_NOT_SET"]))
    opening = open_servers(config, jail_for(root), "assessor", root, lambda *a: None)
    with (
        pytest.raises(McpServerFailed, match=r"^mcp.servers.probe.env: SODA_TEST_NOT_SET is"),
        opening,
    ):
        pass


def test_bad_server_tables_are_one_line_each_naming_the_key(tmp_path: Path) -> None:
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "SPEC.md").write_text("# S\n")
    (tmp_path / "soda.toml").write_text(
        '[mcp.servers."has space"]\ncommand = "x"\nagents = ["executor"]\ntools = ["*"]\n'
    )
    with pytest.raises(ConfigError) as bad_name:
        load(tmp_path / "soda.toml")
    assert bad_name.value.problems == [
        "soda.toml: mcp: Value error, mcp.servers.has space: a server's name is 1-24"
        " letters, digits, _ or -"
    ]
    (tmp_path / "soda.toml").write_text(
        '[mcp.servers.docs]\ncommand = "x"\nagents = ["retrier"]\ntools = []\nenv = ["A-B"]\n'
    )
    with pytest.raises(ConfigError) as bad:
        load(tmp_path / "soda.toml")
    keys = [line.split(": ")[1] for line in bad.value.problems]
    assert sorted(keys) == ["mcp.servers.docs.agents.0", "mcp.servers.docs.env.0",
                            "mcp.servers.docs.tools"]  # fmt: skip


def test_the_agents_a_server_may_be_given_are_the_agents_with_tools() -> None:
    with_tools = set()
    for path in resource_dir("agents").glob("*.md"):
        header = path.read_text().split("+++")
        if len(header) > 2 and 'tools = "none"' not in header[1]:
            with_tools.add(path.stem)
    assert set(get_args(ToolAgent)) == with_tools


def test_doctor_lists_each_servers_tools(root: Path, tmp_path: Path) -> None:
    from tests.sample import sample_project

    project = sample_project(
        tmp_path, settings={"expose = []": f"expose = [{json.dumps(str(TESTS))}]"}
    )
    server = f"""
[mcp.servers.probe]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(SERVER))}]
agents = ["executor", "planner"]
tools = ["read_file", "flood", "missing"]
"""
    with (project / "soda.toml").open("a") as config:
        config.write(server)
    checks = {check.name: check for check in run_checks(project)}
    assert checks["config"].ok, checks["config"].detail
    mcp = checks["mcp"]
    assert mcp.ok, mcp.detail
    assert mcp.detail.startswith(
        "probe (for executor, planner): 2 tool(s) offered: read_file, flood"
    )
    assert "not offered: fetch, spawn, env, write_file, obey, forbidden" in mcp.detail
    assert mcp.detail.endswith("allowed but not listed by the server: missing")


def _runner(tmp_path: Path, model: FunctionModel, config: Config) -> AgentRunner:
    db = open_db(tmp_path / "soda.db")
    config = config.model_copy(update={"model": ModelConfig(max_turns=4)})
    return AgentRunner(model, config, CallRecorder(db, config, "function", Events(db)))


def _refused(call_it: Any) -> str:
    from soda.tools.sandbox import ToolError

    with pytest.raises(ToolError) as refused:
        call_it()
    return str(refused.value)


def test_a_cli_executor_gets_the_servers_through_soda_filter(tmp_path: Path) -> None:
    import subprocess
    import tomllib

    from soda.agent.backends.claude_code import CLAUDE_CODE
    from soda.agent.backends.codex import CODEX
    from soda.agent.backends.run import cli_servers

    config = config_with(probe(agents=["executor"]), context=ContextConfig(tool_result_chars=2000))
    servers, secrets = cli_servers(config, tmp_path)
    assert secrets == {"PROBE_SECRET": SECRET} and servers["probe"].env == ["PROBE_SECRET"]
    claude = CLAUDE_CODE.mcp_options(servers, tmp_path)
    assert claude == ["--mcp-config", str(tmp_path / "mcp.json")]
    described = json.loads((tmp_path / "mcp.json").read_text())["mcpServers"]["probe"]
    assert SECRET not in json.dumps(described)  # the CLI's environment carries it
    codex = CODEX.mcp_options(servers, tmp_path)
    assert codex[0] == "-c" and codex[1].startswith("mcp_servers.probe=")
    table = tomllib.loads(codex[1].replace("mcp_servers.probe=", "x = ", 1))["x"]
    assert table == {
        "command": sys.executable,
        "args": described["args"],
        "env_vars": ["PROBE_SECRET"],
    }
    launch = servers["probe"]
    filtered = subprocess.run(
        [launch.command, *launch.args],
        input="\n".join(
            json.dumps({"jsonrpc": "2.0", "id": n, "method": method, "params": params})
            for n, method, params in [
                (1, "tools/list", {}),
                (2, "tools/call", {"name": "forbidden", "arguments": {}}),
                (3, "tools/call", {"name": "flood", "arguments": {"chars": 10_000_000}}),
            ]
        )
        + "\n",
        capture_output=True,
        text=True,
        timeout=30,
    )
    answers = {m["id"]: m["result"] for m in map(json.loads, filtered.stdout.splitlines())}
    names = [t["name"] for t in answers[1]["tools"]]
    assert "forbidden" not in names and names == ALLOWED[: len(names)]
    assert all(t["description"].startswith("Tool ") for t in answers[1]["tools"])
    assert answers[2]["isError"] and "not allowed" in answers[2]["content"][0]["text"]
    assert len(answers[3]["content"][0]["text"]) == 2000


def test_in_the_loop_the_executor_alone_gets_the_server_and_nothing_is_left(
    tmp_path: Path,
) -> None:
    """One iteration of the real loop on the demo's project: the server named for
    the executor is offered to it alone, its call runs in the task's jail with
    the named secret, and the run's record holds its events but not the secret."""
    from soda.loop.run import run_iteration
    from tests.plan_fakes import done, fake_model, new_project, open_session, plan, task

    offered: dict[str, set[str]] = {}
    seen: list[str] = []

    def noting(agent: str, answer: Any) -> Any:
        def wrapped(request: ModelRequest) -> Any:
            names = {t.name for t in request.tools if t.name.startswith("mcp__")}
            offered.setdefault(agent, set()).update(names)
            return answer(request)

        return wrapped

    def executor(request: ModelRequest) -> Any:
        turns = sum(1 for m in request.messages if m.tool_calls)
        if turns == 0:
            return call("mcp__probe__env", name="PROBE_SECRET")
        if turns == 1:
            seen.extend(last_results(request))
            return call("write_file", path="notes/a.txt", content="a")
        return done("wrote the note")

    expose = {"expose = []": f"expose = [{json.dumps(str(TESTS))}]"}
    root = new_project(tmp_path, expose)
    with (root / "soda.toml").open("a") as config:
        config.write(
            f"\n[mcp.servers.probe]\ncommand = {json.dumps(sys.executable)}\n"
            f'args = [{json.dumps(str(SERVER))}]\nenv = ["PROBE_SECRET"]\n'
            f'agents = ["executor"]\ntools = ["env"]\n'
        )
    git(root, "commit", "-q", "-am", "an MCP server for the executor")
    base = fake_model(plan(task("a")))
    model = FunctionModel.by_agent(
        {
            "verifier": noting("verifier", lambda r: base.answer(r)),
            "assessor": noting("assessor", lambda r: base.answer(r)),
            "planner": noting("planner", lambda r: base.answer(r)),
            "executor": noting("executor", executor),
        }
    )
    session = open_session(root, model)
    before = set(server_pids())
    try:
        run_iteration(session, lambda line: None)
    finally:
        session.finish_run("done", "test")
    assert offered == {
        "verifier": set(), "assessor": set(), "planner": set(),
        "executor": {"mcp__probe__env"},
    }  # fmt: skip
    assert seen == [SECRET]
    assert [pid for pid in server_pids() if pid not in before] == []
    rows = list(session.db["events"].rows_where("kind LIKE 'mcp.%'", order_by="id"))
    assert [row["kind"] for row in rows] == ["mcp.start", "mcp.call", "mcp.end"]
    assert all(json.loads(row["data_json"])["agent"] == "executor" for row in rows)
    record = json.dumps([list(session.db[t].rows) for t in ("events", "agent_calls")])
    assert SECRET not in record
    assert git(root, "show", "soda/spec:notes/a.txt") == "a"  # merged
