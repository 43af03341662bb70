"""The run_command tool: a shell command in the jail, bounded by a timeout.

The command runs through `Jail.run` (see `soda.system.jail`): the sandbox root is the
repository, nothing else of the machine is writable, no credentials, no network
unless allowed, and nothing it starts outlives it. Output is head-and-tail
truncated. A non-zero exit is a normal answer, not a tool error: the model
needs to see it.
"""

from __future__ import annotations

from soda.llm.base import ToolSpec
from soda.system.jail import Jail
from soda.system.proc import CommandResult
from soda.tools.sandbox import Sandbox, ToolError
from soda.tools.toolbox import Tool, described, object_schema

UNDO = (
    "To undo your change to a committed file, run `git show HEAD:path > path` (or `git diff "
    "path | git apply -R`), or put the old text back with edit_file; remove a new file with "
    "`rm path`."
)


def describe(jail: Jail, command_timeout: float) -> str:
    """run_command's description: what the command can and cannot do here, from
    the jail it will run in (tests/test_tools_guidance.py checks each claim in
    the real jail), and the undo that works there."""
    limit = f"{command_timeout:g}s"
    what = (
        "Run a shell command (/bin/sh -c) in the repository root, e.g. the tests or a quick "
        "script; stdin is empty, the answer is the exit code then stdout and stderr merged, "
        "and a non-zero exit is a normal answer."
    )
    if jail.mode == "none":
        where = (
            'It runs unconfined (sandbox.mode = "none") with a scrubbed environment, so stay '
            "inside the repository."
        )
    else:
        network = "network on" if jail.network else "no network"
        where = (
            f"It runs in a jail: {network}; only the working tree is writable, and a private "
            "/tmp emptied after each command; .git is read-only (git status, diff, log and "
            "show work; git add, commit, stash, checkout and restore fail); HOME is empty but "
            "for read-only toolchains; every process it starts is killed when it ends."
        )
    return (
        f"{what} {where} {UNDO} It is killed after timeout_seconds (at most {limit}), and "
        "long output keeps its head and tail."
    )


def command_tools(
    sandbox: Sandbox, jail: Jail, command_timeout: float, output_limit: int
) -> list[Tool]:
    spec = ToolSpec(
        "run_command",
        describe(jail, command_timeout),
        object_schema(
            {
                "command": described(
                    "string", "The shell command, run from the repository root, e.g. 'ls src'."
                ),
                "timeout_seconds": described(
                    ["number", "null"],
                    f"Seconds before it is killed; null means the maximum, {command_timeout:g}.",
                ),
            }
        ),
    )
    return [
        Tool(
            spec,
            lambda a: run_command(
                sandbox, jail, a["command"], a["timeout_seconds"], command_timeout, output_limit
            ),
        )
    ]


def run_command(
    sandbox: Sandbox,
    jail: Jail,
    command: str,
    timeout_seconds: float | None,
    command_timeout: float,
    output_limit: int,
) -> str:
    if not command.strip():
        raise ToolError("command is empty")
    if timeout_seconds is not None and timeout_seconds <= 0:
        raise ToolError("timeout_seconds must be positive (or null for the maximum)")
    timeout = command_timeout if timeout_seconds is None else min(timeout_seconds, command_timeout)
    result = jail.run(command, sandbox.root, timeout=timeout, output_limit=output_limit)
    return _report(result, timeout)


def _report(result: CommandResult, timeout: float) -> str:
    if result.timed_out:
        status = f"timed out after {timeout:g}s and was killed"
    else:
        status = f"exit code {result.returncode}"
    output = result.output if result.output.strip() else "(no output)"
    return f"{status} ({result.duration_s:.1f}s)\n{output}"
