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
from soda.tools.toolbox import Tool, object_schema


def command_tools(
    sandbox: Sandbox, jail: Jail, command_timeout: float, output_limit: int
) -> list[Tool]:
    spec = ToolSpec(
        "run_command",
        "Run a shell command (/bin/sh -c) in the working directory, e.g. the tests. "
        f"stdin is empty; stdout and stderr are merged. timeout_seconds null means the "
        f"maximum, {command_timeout:g}s; longer requests are cut to it.",
        object_schema(
            {"command": {"type": "string"}, "timeout_seconds": {"type": ["number", "null"]}}
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
