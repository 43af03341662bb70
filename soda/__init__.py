"""soda: an autonomous coding daemon that loops Sense -> Orient -> Decide -> Act.

The package is a house of rooms, one idea each; `LAYERS` says which rooms each
may import from, lowest first. `tests/test_layout.py` walks the import graph and
fails on an import the table does not allow, on a room the table does not know,
and on any circle between modules. Each room's docstring repeats its row (the
test checks that too), so a reader sees the rule where the code is.
See docs/architecture.md for what each room owns and where a new thing goes.
"""

__version__ = "0.1.0"

_GROUND = frozenset({"errors", "config"})

LAYERS: dict[str, frozenset[str]] = {
    # ground: no judgment, no state
    "errors": frozenset(),
    "config": frozenset({"errors"}),
    "system": _GROUND,
    "repo": _GROUND | {"system"},
    "contracts": _GROUND,
    "llm": _GROUND,
    # record keepers
    "store": _GROUND | {"system", "contracts", "llm"},
    "events": _GROUND | {"system", "store"},
    "trace": _GROUND | {"contracts", "store"},
    "gate": _GROUND | {"system", "repo", "contracts", "store", "events"},
    "human": _GROUND | {"system", "repo", "contracts", "store", "events", "trace"},
    "forge": _GROUND | {"system", "repo", "contracts", "store", "events"},
    # agents
    "tools": _GROUND | {"system", "repo", "llm", "gate"},
    "agent": _GROUND | {"system", "repo", "contracts", "llm", "store", "events", "tools"},
    # the iteration, and what runs it
    "loop": _GROUND
    | {"system", "repo", "contracts", "llm", "store", "events", "trace", "gate", "human"}
    | {"forge", "tools", "agent"},
    "daemon": _GROUND
    | {"system", "repo", "contracts", "llm", "store", "events", "human", "forge", "loop"},
    "fleet": _GROUND | {"system", "repo", "contracts", "store", "events", "human", "loop"},
    # faces: what a person runs and looks at
    "web": _GROUND | {"system", "contracts", "store", "events", "trace", "human"},
    "mcp": _GROUND | {"system", "contracts", "store", "events", "trace", "human"},
    "cli": frozenset(),  # filled below: the CLI may import every other room
}
"""Room -> the rooms it may import (besides itself). An executor backend goes in
`agent/backends/`; `fleet` (many repositories on Temporal) is the only room that
imports Temporal."""
LAYERS["cli"] = frozenset(LAYERS) - {"cli"}

ALLOWED_CIRCLES: frozenset[tuple[str, str]] = frozenset(
    {("soda.contracts.claims", "soda.contracts.claims_text")}
)
"""Module edges a circle may use: `Claims.prompt_text` and `prompt_parts` import
their renderer inside the method (the renderer needs the model's types; the model
offers the text)."""
