"""`[mcp.servers.NAME]`: the MCP servers soda's agents may use, each run in the jail.

A server is a program speaking MCP over stdio. soda starts it inside the jail
(as it runs a command: no home, no network unless `[sandbox] network`, its own
process tree) for the agents it names, offers the tools its allow-list names
beside soda's own (as `mcp__NAME__TOOL`), and stops it when their run ends.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, model_validator

from soda.config.sections import Section

ToolAgent = Literal["executor", "planner", "orienter", "verifier", "assessor"]
"""The agents that work with tools (`agents/*.md` whose `tools` is not "none"):
the ones a server may be given to (checked against the agent files by the tests)."""

SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,24}$")
"""A server's name: it is part of every tool name the model sees (`mcp__NAME__TOOL`,
at most 64 characters of letters, digits, `_` and `-`)."""

EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
ToolName = Annotated[str, StringConstraints(pattern=r"^(\*|[A-Za-z0-9_.-]{1,64})$")]


class McpServer(Section):
    command: str = Field(min_length=1)
    """The program that starts the server, run inside the jail with the task's
    worktree as the repository: a name on the jail's PATH or an absolute path (a
    program under your home needs `[sandbox] expose`)."""
    args: list[str] = Field(default_factory=list)
    """Its arguments."""
    env: list[EnvName] = Field(default_factory=list)
    """Names of environment variables soda passes to the server from its own
    environment (its secrets): never written to the repository or soda's record.
    The jail's usual environment (PATH, locale) comes too."""
    agents: list[ToolAgent] = Field(min_length=1)
    """Which agents get its tools: "executor", "planner", "orienter", "verifier",
    "assessor". A coding CLI executor gets them through its own MCP configuration."""
    tools: list[ToolName] = Field(min_length=1)
    """The tools offered, by the server's names for them; ["*"] offers every tool
    it lists. A tool not named here is neither offered nor callable."""
    start_timeout: float = Field(30.0, ge=1, le=600, allow_inf_nan=False)
    """Seconds the server may take to start and list its tools (1-600)."""
    call_timeout: float = Field(120.0, ge=1, le=3600, allow_inf_nan=False)
    """Seconds one tool call may take; a slower call is an error result (1-3600)."""

    def allows(self, tool: str) -> bool:
        """Whether the allow-list offers the server's tool `tool`."""
        return "*" in self.tools or tool in self.tools


class McpConfig(Section):
    servers: dict[str, McpServer] = Field(default_factory=dict)
    """MCP servers for soda's agents, one `[mcp.servers.NAME]` table each (NAME:
    letters, digits, `_` and `-`, at most 24), e.g. command = "docs-server",
    agents = ["executor"], tools = ["search"]. Each runs in the jail; the MCP
    SDK is the `mcp` extra (pip install 'soda-daemon[mcp]')."""

    @model_validator(mode="after")
    def _names(self) -> McpConfig:
        for name in self.servers:
            if not SERVER_NAME.match(name):
                raise ValueError(
                    f"mcp.servers.{name}: a server's name is 1-24 letters, digits, _ or -"
                )
        return self

    def for_agent(self, agent: str) -> dict[str, McpServer]:
        """The servers whose tools `agent` is offered, by name."""
        return {name: s for name, s in self.servers.items() if agent in s.agents}
