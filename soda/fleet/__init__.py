"""Many repositories on many machines: soda's loop as durable Temporal workflows.

One workflow per repository and spec (`workflow.py`) holds only what must outlive
any one machine (`state.py`: the iteration count, pending human inputs, the model's
place, learnings and Trace tasks, each finished iteration's summary); each
iteration runs unchanged inside an activity (`activities.py`: placement, the
iteration heartbeating, the person's inputs passed on) on the worker that holds
the repository's clone, chosen when the run is placed; `iteration.py` is the
iteration itself (`run_iteration`, as `soda run` runs it, the milestone pushed
after each merge) and `checkout.py` the clone, its rebuild, the pushes (the
milestone; an iteration's report beside it) and the cache's clean-up.
`worker.py` is `soda worker`, `client.py` what `soda fleet ...` asks of the
server, `devserver.py` `soda fleet dev`. Temporal (the optional
`soda-daemon[fleet]` extra) is imported only in this room.

May import: config, contracts, errors, events, human, loop, repo, store, system.
"""
