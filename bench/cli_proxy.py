"""What soda's egress path adds to one model call of a coding CLI: a streamed
Messages-API call to the local stand-in (tests/fakestream.py), sent directly vs
through the in-jail forwarder (launcher.py, on loopback) and the egress proxy
(unix socket, the key swapped in, the answer metered and recorded in a real
SQLite `agent_calls`). One keep-alive connection each, as the CLIs use; calls
interleaved after a warm-up. Prints the median and p95 of each and the
milliseconds added (goal: <= 5 ms at the median). Exits 1 when the goal is missed.

    python bench/cli_proxy.py [-n 200] [--warmup 20]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.fakestream

from soda.agent.backends.proxy import EgressProxy, Route
from soda.llm.base import ModelResponse
from soda.store import agent_calls, open_db
from tests.fakestream import StreamAPI, say

GOAL_MS = 5.0
BODY = json.dumps(
    {
        "model": "claude-sonnet-4-6",
        "max_tokens": 1024,
        "stream": True,
        "messages": [{"role": "user", "content": "hello " * 2000}],
    }
).encode()


def call_ms(connection: http.client.HTTPConnection) -> float:
    started = time.perf_counter()
    connection.request(
        "POST", "/v1/messages", BODY, {"content-type": "application/json", "x-api-key": "x"}
    )
    response = connection.getresponse()
    data = response.read()
    elapsed = (time.perf_counter() - started) * 1000
    if response.status != 200 or b"message_stop" not in data:
        raise SystemExit(f"call failed: {response.status} {data[:200]!r}")
    return elapsed


def forwarder(proxy: EgressProxy) -> tuple[subprocess.Popen[bytes], str]:
    """The launcher outside a jail, its "CLI" a script that prints its base URL."""
    launcher = proxy.directory / "launcher.py"
    source = resources.files("soda.agent.backends").joinpath("launcher.py")
    launcher.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    child = [sys.executable, "-c", "import os, time; print(os.environ['URL'], flush=True); "
             "time.sleep(600)"]  # fmt: skip
    process = subprocess.Popen(
        [sys.executable, "-I", str(launcher), str(proxy.socket_path),
         "URL=http://127.0.0.1:@SODA_PORT@", "--", *child],
        stdout=subprocess.PIPE,
        start_new_session=True,  # the launcher and its child end together (killpg)
    )  # fmt: skip
    assert process.stdout is not None
    return process, process.stdout.readline().decode().strip()


def p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=20, method="inclusive")[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=200, help="measured calls per path")
    parser.add_argument("--warmup", type=int, default=20, help="unmeasured calls per path")
    args = parser.parse_args()
    api = StreamAPI(lambda seen: say("hello there, " * 50)).start()
    with tempfile.TemporaryDirectory(prefix="soda-bench-") as tmp:
        db = open_db(Path(tmp) / "soda.db")

        def record(agent: str, response: ModelResponse, turn: int, *more: object) -> None:
            agent_calls.record(db, None, None, agent, "anthropic", turn, response, 0.0)

        route = Route(api.url, frozenset({"/v1/messages"}), "messages", "x-api-key", "anthropic")
        proxy = EgressProxy(route, "sk-real", "executor:bench", record, lambda k, d: None)
        proxy.start()
        process, url = forwarder(proxy)
        try:
            host = urlsplit(api.url)
            direct = http.client.HTTPConnection(host.hostname or "", host.port)
            via = urlsplit(url)
            proxied = http.client.HTTPConnection(via.hostname or "", via.port)
            samples: dict[str, list[float]] = {"direct": [], "proxied": []}
            for i in range(args.warmup + args.n):
                for name, connection in (("direct", direct), ("proxied", proxied)):
                    elapsed = call_ms(connection)
                    if i >= args.warmup:
                        samples[name].append(elapsed)
        finally:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            proxy.close()
            api.close()
        recorded = db.execute("SELECT COUNT(*) FROM agent_calls").fetchone()[0]
    print(
        f"one streamed Messages-API call ({len(BODY):,} bytes up), {args.n} calls each after "
        f"{args.warmup} warm-up calls; {recorded} calls recorded in agent_calls"
    )
    for name, values in samples.items():
        print(
            f"  {name:<8} median {statistics.median(values):6.2f} ms   "
            f"p95 {p95(values):6.2f} ms   min {min(values):6.2f} ms"
        )
    added = statistics.median(samples["proxied"]) - statistics.median(samples["direct"])
    ratio = statistics.median(samples["proxied"]) / statistics.median(samples["direct"])
    verdict = "met" if added <= GOAL_MS else "MISSED"
    goal = f"goal <= {GOAL_MS:.0f} ms: {verdict}"
    print(f"  added    median {added:6.2f} ms   ratio {ratio:4.2f}x   ({goal})")
    return 0 if added <= GOAL_MS else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main())
