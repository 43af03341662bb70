"""Go's build cache, kept between test runs without letting one run poison the next.

In the jail the home is empty, so every `go test` used to start with an empty
build cache and compile and vet every package again. A cache shared by runs
would be the obvious fix and the wrong one: the tests are agent-run code, and a
test that can write the cache can plant a compiled package or a test result
("ok") under the key of a later run's inputs, which that run then trusts
without compiling or running anything. So the cache soda keeps (in its state
directory, never in the worktree or the person's home) is written only by the
toolchain:

1. warm-up: the same `go test` with `-count=1 -exec /bin/true` added, the cache
   bound read-write. The go command compiles, vets and links as the real run
   would, but runs no test binary (`/bin/true` stands in for each), and with
   `-count=1` it records no test result. Building runs no project code (go's
   own rule: cgo flags are allow-listed, `go generate` is not part of a build);
   GOTOOLCHAIN=local keeps a go.mod from switching toolchains.
2. the real run reads the cache through a throw-away overlay: what the tests
   write there vanishes with the jail.

Only a plain `go test ...` command is warmed, run as its words with no shell,
and never with a flag that runs a program of its own (-exec, -toolexec,
-vettool); another command may run more than the toolchain. Nothing is shared
without the overlay (an older bubblewrap, or `sandbox.mode = "none"`): each
run starts empty as before.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from soda.config import Config
from soda.system.jail import Jail, Mount

JAIL_PATH = Path("/tmp/.soda-go-build")
"""Where the cache appears inside the jail (the jail's own /tmp)."""

_SHELL = re.compile(r"[;&|<>`()\n]|\$\(")
"""What makes a command more than one program run (lists, pipes, redirections,
substitutions)."""
_PROGRAMS = ("exec", "toolexec", "vettool", "c", "o", "args", "")
"""go test flags that run a program of their own, build a binary instead of
testing, or hand the rest to the test binary (and `--`)."""


def cache_dir(config: Config) -> Path:
    return config.state_dir / "cache" / "go-build"


def warm_command(command: str) -> list[str] | None:
    """`command` as the warm-up runs it (its words, run without a shell, so
    nothing but the go command starts), or None when it is not a plain
    `go test` (shell syntax, or a flag in `_PROGRAMS`)."""
    if _SHELL.search(command):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if words[:2] != ["go", "test"]:
        return None
    flags = (w.split("=")[0].lstrip("-") for w in words[2:] if w.startswith("-"))
    if any(flag in _PROGRAMS for flag in flags):
        return None
    return [*words, "-count=1", "-exec", "/bin/true"]


def prepare(
    config: Config, jail: Jail, checkout: Path, command: str, sealed: bool = False
) -> tuple[dict[str, str], list[Mount]]:
    """Warm the cache for `command` on `checkout` and return what the real run
    needs to read it (environment, mounts); nothing when it cannot be shared.
    `sealed`: as the real run (the checkout must not change)."""
    warm = warm_command(command)
    cache = cache_dir(config)
    if warm is None or jail.mode == "none":
        return {}, []
    cache.mkdir(parents=True, exist_ok=True)
    if not jail.can_seal(cache):
        return {}, []
    jail.run(
        warm,
        checkout,
        timeout=config.act.command_timeout,
        output_limit=2000,
        extra_env={"GOCACHE": str(JAIL_PATH), "GOTOOLCHAIN": "local"},
        sealed=sealed,
        mounts=[Mount(cache, JAIL_PATH)],
    )  # its outcome is not evidence: the real run says what passed
    return {"GOCACHE": str(JAIL_PATH)}, [Mount(cache, JAIL_PATH, scratch=True)]
