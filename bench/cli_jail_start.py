"""What the jail costs a coding-CLI task at its start, and over a whole short task.

Two measurements, each interleaved between `sandbox.mode = "bwrap"` and `"none"`
after a warm-up:

- start: the egress proxy up, the launcher started (in the jail: bubblewrap, the
  worktree at the repository's path, the proxy's directory bound read-only) with
  `true` as its CLI, and everything torn down again;
- task: `claude -p` (the pinned Claude Code, installed by `soda tools install`)
  doing a one-turn task against the local stand-in API (tests/fakestream.py)
  through the proxy, from start to its exit, as ACT runs it (`run_cli`).

Prints the median and p95 of each and the milliseconds the jail adds.

    python bench/cli_jail_start.py [-n 10] [--warmup 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.fakestream

from soda.agent.backends import run as cli
from soda.agent.backends.proxy import EgressProxy
from soda.config import Config, ExecutorConfig, SandboxConfig
from soda.system.jail import Jail
from tests.fakestream import StreamAPI, say

KEY_ENV = "SODA_BENCH_KEY"


def repository(tmp: Path) -> Path:
    root = tmp / "repo"
    root.mkdir()
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "init"]):
        subprocess.run(
            ["git", "-c", "user.name=b", "-c", "user.email=b@example.invalid", *args],
            cwd=root, check=True, capture_output=True,
        )  # fmt: skip
    return root


def start_ms(config: Config, jail: Jail, root: Path) -> float:
    """Proxy, launcher (with `true` as the CLI) in the jail, teardown."""
    started = time.perf_counter()
    route, _ = cli.BACKENDS["claude-code"].route(config)
    proxy = EgressProxy(route, "sk", "bench", lambda *call: None, lambda k, d: None).start()
    try:
        launcher = proxy.directory / "launcher.py"
        launcher.write_text((Path(cli.__file__).parent / "launcher.py").read_text())
        confined = dataclasses.replace(jail, expose=(*jail.expose, proxy.directory))
        argv = [sys.executable, "-I", str(launcher), str(proxy.socket_path), "--", "true"]
        with confined.wrapper(root) as prefix:
            done = subprocess.run([*prefix, *argv], env=confined.environment(), cwd=root)
        assert done.returncode == 0, done
    finally:
        proxy.close()
    return (time.perf_counter() - started) * 1000


def task_ms(config: Config, jail: Jail, root: Path) -> float:
    started = time.perf_counter()
    outcome = cli.run_cli(
        "claude-code", config, jail, root, "say done", lambda *call: None, lambda k, d: None
    )
    assert not outcome.failed, outcome.failed
    return (time.perf_counter() - started) * 1000


def p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=20, method="inclusive")[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=10, help="measured runs per mode")
    parser.add_argument("--warmup", type=int, default=2, help="unmeasured runs per mode")
    args = parser.parse_args()
    os.environ[KEY_ENV] = "sk-bench"
    api = StreamAPI(lambda seen: say("done")).start()
    samples: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="soda-bench-") as tmp:
        root = repository(Path(tmp))
        executor = ExecutorConfig(backend="claude-code", base_url=api.url, api_key_env=KEY_ENV)
        configs = {
            mode: Config(root=root, sandbox=SandboxConfig(mode=mode), executor=executor)
            for mode in ("bwrap", "none")
        }
        jails = {mode: Jail.for_config(config) for mode, config in configs.items()}
        try:
            for what, measure in (("start", start_ms), ("task", task_ms)):
                for i in range(args.warmup + args.n):
                    for mode in ("bwrap", "none"):
                        elapsed = measure(configs[mode], jails[mode], root)
                        if i >= args.warmup:
                            samples.setdefault(f"{what} {mode}", []).append(elapsed)
        finally:
            api.close()
    print(f"a CLI task's start and a one-turn claude-code task, {args.n} runs each")
    for name, values in samples.items():
        print(
            f"  {name:<12} median {statistics.median(values):7.1f} ms   "
            f"p95 {p95(values):7.1f} ms   min {min(values):7.1f} ms"
        )
    for what in ("start", "task"):
        jailed = statistics.median(samples[f"{what} bwrap"])
        bare = statistics.median(samples[f"{what} none"])
        print(
            f"  jail adds to {what}: {jailed - bare:6.1f} ms at the median ({jailed / bare:.2f}x)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
