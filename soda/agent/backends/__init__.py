"""Executors that are another program: the coding CLIs people already use (Claude
Code, Codex), run as a task's executor inside soda's jail with the API key kept
outside it. The executor port (`port.py`: what a backend provides) and its two
CLI implementations (`claude_code.py`, `codex.py`; the built-in agent is the
third executor); the pinned versions and `soda tools install` (`pins.py`); the
egress proxy that holds the key, forwards only model calls and records each in
`agent_calls` (`proxy.py`, metering in `usage.py`); the in-jail forwarder and
launcher (`launcher.py`, standard library only); one task's run under its
watchdogs (`run.py`).

May import: config, contracts, errors, events, llm, repo, store, system, tools.
"""
