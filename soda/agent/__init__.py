"""Agents: an agent is data (`agents/NAME.md`: prompt, contract, tools, model
tier), loaded by `definition.py` and run by `runtime.py` (the model calls and
their second chances) through `turns.py` (tool choice, a turn's calls in order,
schema slips handed back, the final answer checked against its contract). Beside
them: `limits.py` (an agent's share of its model's context window),
`condense.py` (older tool results as one-line summaries), `recorder.py` (every
model call stored, the iteration's totals) and `budget.py` (the limits). An
executor backend that is not soda's own tool loop goes in `agent/backends/`.

May import: config, contracts, errors, events, llm, repo, store, system, tools.
"""
