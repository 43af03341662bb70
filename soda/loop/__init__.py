"""One iteration and the loop around it. `session.py` and `context.py` are what
the phases receive (the process's services, one iteration's record); the
phases are `sense.py`, `orient.py` (with `planning.py`, `asking.py`),
`decide.py` and `act/`; `phases.py` runs the ones before ACT and `run.py` the
iteration and the loop. Around them: `plan_only.py` (`soda plan`),
`iteration_report.py`, `recovery.py` (after a crash) and `wake.py` (free wakes).
Phase modules never import `phases.py` or `run.py`; `act/` never imports ORIENT's.
Hosts (`soda run`, the daemon, the fleet) and faces enter through the door,
`host.py`, and the policy, `policy.py`, only: the rest is the loop's own.

May import: agent, config, contracts, errors, events, forge, gate, human, llm, repo,
store, system, tools, trace.
"""
