"""The background process: `process.py` (the daemon: wakes on inbox files, spec
changes and its schedule, runs the loop, reloads its config), `control.py`
(`soda start` / `soda stop` from outside the process), `issues.py` (the
tracker's queue, one issue's run at a time, and what is written back) and
`parts.py` (log rotation, working windows, the watcher's restarts, killing a
process tree).

May import: config, contracts, errors, events, forge, human, llm, loop, repo, store, system.
"""
