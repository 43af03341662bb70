"""Progress while `soda run` and `soda demo` work, driven by the run's events.

Where the iteration is (phase), who is thinking (agent, turn), what it has cost
so far (tokens, USD) and for how long: on a terminal one live line that rich
redraws under the loop's own output; elsewhere (a pipe, a log, a test) a plain
line per model turn and per agent that finishes, so a log shows the same.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from soda.events import Events

PHASES = {
    "sense.start": "sense",
    "orient.start": "orient",
    "decide.done": "decide",
    "act.start": "act",
}
"""The events that say a phase began (DECIDE is pure: it is done when it is seen)."""


@dataclass
class RunState:
    """What the progress shows, updated from events."""

    iteration: int | None = None
    phase: str = "starting"
    agent: str | None = None
    turn: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    started: float = 0.0

    def update(self, kind: str, data: dict[str, Any], clock: float) -> None:
        if kind == "iteration.start":
            self.iteration = data.get("number")
            self.phase, self.agent, self.turn = "sense", None, 0
            self.tokens, self.cost_usd, self.started = 0, 0.0, clock
        elif kind in PHASES:
            self.phase, self.agent, self.turn = PHASES[kind], None, 0
        elif kind == "agent.start":
            self.agent, self.turn = str(data.get("agent")), 0
        elif kind == "agent.turn":
            self.agent, self.turn = str(data.get("agent")), int(data.get("turn") or 0)
            self.tokens += int(data.get("tokens_in") or 0) + int(data.get("tokens_out") or 0)
            self.cost_usd += float(data.get("cost_usd") or 0.0)
        elif kind == "agent.end":
            self.agent, self.turn = None, 0

    def describe(self, clock: float) -> str:
        """e.g. `iteration 3 | orient | orienter turn 2 | 12,345 tokens $0.0412 | 42s`."""
        where = f"iteration {self.iteration}" if self.iteration is not None else "starting"
        parts = [where, self.phase]
        if self.agent:
            parts.append(f"{self.agent} turn {self.turn}" if self.turn else f"{self.agent}")
        parts.append(f"{self.tokens:,} tokens ${self.cost_usd:.4f}")
        if self.iteration is not None:
            parts.append(f"{clock - self.started:.0f}s")
        return " | ".join(parts)


class _LiveLine:
    """The live line's renderable: recomputed at every refresh, so elapsed ticks."""

    def __init__(self, state: RunState, clock: Callable[[], float]) -> None:
        self.state = state
        self.clock = clock
        self.spinner = Spinner("dots", style="cyan")

    def __rich__(self) -> Table:
        grid = Table.grid(padding=(0, 1))
        grid.add_row(self.spinner, Text(self.state.describe(self.clock()), style="dim"))
        return grid


@contextmanager
def show_progress(
    events: Events, console: Console, clock: Callable[[], float] = time.monotonic
) -> Iterator[RunState]:
    """Show the run's progress on `console` while the block runs."""
    state = RunState(started=clock())
    if console.is_terminal and not console.is_dumb_terminal:
        with Live(
            _LiveLine(state, clock),
            console=console,
            refresh_per_second=4,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        ):
            unsubscribe = events.subscribe(lambda kind, data: state.update(kind, data, clock()))
            try:
                yield state
            finally:
                unsubscribe()
        return

    def plain(kind: str, data: dict[str, Any]) -> None:
        state.update(kind, data, clock())
        if kind == "agent.turn":
            console.print(f"  progress: {state.describe(clock())}", markup=False, highlight=False)
        elif kind == "agent.end":
            turns = int(data.get("turns") or 0)
            console.print(
                f"  progress: {data.get('agent')} {data.get('outcome')} after {turns}"
                f" turn{'' if turns == 1 else 's'} | {state.describe(clock())}",
                markup=False,
                highlight=False,
            )

    unsubscribe = events.subscribe(plain)
    try:
        yield state
    finally:
        unsubscribe()
