"""`soda doctor`'s check of `[mcp.servers]`: each server started once in the jail
(on the person's checkout, through an overlay where the jail can lay one, so
its writes vanish), its tools listed, then stopped."""

from __future__ import annotations

from soda.config import Config
from soda.llm.base import ignore_event
from soda.system.jail import Jail
from soda.tools.servers import started

SHOWN = 8
"""Tool names listed per server; the rest are counted."""


def check_servers(config: Config) -> str:
    """One line per server: the tools it offers (and those it lists but are not
    offered); McpServerFailed (one line) for the first that does not start."""
    jail = Jail.for_config(config)
    jail.ensure_available()
    root = config.root
    sealed = jail.can_seal(root.parent)
    lines = []
    for name, server in config.mcp.servers.items():
        agents = ", ".join(server.agents)
        with started({name: server}, jail, server.agents[0], root, ignore_event, sealed) as s:
            offered = [spec.name.removeprefix(f"mcp__{name}__") for spec in s.specs()]
            skipped = s.skipped.get(name, [])
        shown = ", ".join(offered[:SHOWN]) + (
            f" and {len(offered) - SHOWN} more" if len(offered) > SHOWN else ""
        )
        line = f"{name} (for {agents}): {len(offered)} tool(s) offered" + (
            f": {shown}" if offered else ""
        )
        if skipped:
            line += f"; not offered: {', '.join(skipped[:SHOWN])}"
        listed = {tool.name for running in s.running for tool in running.tools}
        unknown = [tool for tool in server.tools if tool != "*" and tool not in listed]
        if unknown:
            line += f"; allowed but not listed by the server: {', '.join(unknown)}"
        lines.append(line)
    return "\n".join(lines)
