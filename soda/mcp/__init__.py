"""`soda mcp serve`: soda as a Model Context Protocol server over stdio, so a
person's MCP client (Claude Code, Codex, an editor) reads what soda does on
one repository and says what the person says: corrections, answers, verdicts
on a waiting plan or merge, pause, resume, stop.

The CLI hands in its own reports (`server.Reports`), as it does to the
dashboard. Besides this room only `soda.tools.servers` (the client side: MCP
servers for soda's agents) imports the MCP SDK (the optional `[mcp]` extra).

    guard.py    who may serve: never inside soda's jail, only a state directory
                soda made and this process can write
    server.py   the tools (typed; a refusal is a tool error naming what is wrong)
                and the stdio server

May import: config, contracts, errors, events, human, store, system, trace.
"""
