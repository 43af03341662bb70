"""The budgets, each with a clear scope (`[budget]` and `[loop]` in soda.toml):

    budget                           counts                      starts again
    budget.max_cost_usd              one run: a `soda run`, or   at the next run or wake
                                     one wake of the daemon
    budget.max_cost_usd_per_day      every run of the local day  at midnight, or
                                                                 `soda budget reset`
    budget.max_tokens_per_iteration  one iteration               at the next iteration
    budget.max_tokens_per_run        one run, as above (every    at the next run or wake
                                     model, priced or not; 0: off)
    loop.max_iterations              one run, as above           at the next run or wake
    budget.max_wall_seconds          one run's wall-clock time   at the next run or wake
                                     (soda.loop.wall)

`check` raises BudgetExhausted naming the budget that was hit and how to raise or
reset it (the recorder calls it after every model call, the loop before an
iteration starts); `uses` and `budget_lines` say where each one stands, for
`soda status` and `soda budget`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlite_utils import Database

from soda.config import Config
from soda.errors import BudgetExhausted
from soda.store import agent_calls as calls
from soda.store import budgets as rows

DAY = "day"
"""The budget `soda budget reset` resets (the others start again by themselves)."""


@dataclass(frozen=True)
class BudgetUse:
    """Where one budget stands."""

    key: str
    """Its key in soda.toml, e.g. budget.max_cost_usd_per_day."""
    scope: str
    """What it counts, in words: "today", "run 12 (this wake)", "iteration 7"."""
    used: float
    limit: float
    unit: str
    """usd, tokens or iterations."""
    off: bool = False
    """A budget a person turned off (0): shown with its use, never spent."""

    @property
    def spent(self) -> bool:
        return not self.off and self.used > self.limit

    def amount(self, value: float) -> str:
        return f"${value:.4f}" if self.unit == "usd" else f"{int(value):,}"

    def line(self) -> str:
        if self.off:
            return f"{self.key}: off ({self.amount(self.used)} {self.unit} in {self.scope})"
        mark = " - SPENT" if self.spent else ""
        return (
            f"{self.key}: {self.amount(self.used)} of {self.amount(self.limit)}"
            f" ({self.scope}){mark}"
        )


def day_start(moment: datetime | None = None) -> str:
    """Local midnight of `moment`'s day (default: now), as ISO-8601 UTC."""
    local = (moment or datetime.now()).astimezone()
    midnight = local.replace(hour=0, minute=0, second=0, microsecond=0).astimezone(UTC)
    return midnight.isoformat(timespec="milliseconds")


def day_use(config: Config, db: Database) -> BudgetUse:
    """Today's spend: the calls since local midnight, and after the last `soda budget
    reset` (a reset made yesterday excludes nothing of today's)."""
    spent = rows.spent_since(db, day_start(), rows.last_reset(db, DAY))
    return BudgetUse(
        "budget.max_cost_usd_per_day", "today", spent, config.budget.max_cost_usd_per_day, "usd"
    )


def uses(config: Config, db: Database) -> list[BudgetUse]:
    """Every budget's use and limit, in the order of the module's table."""
    found = [day_use(config, db)]
    latest = rows.latest_run(db)
    if latest is not None:
        run_id, status = latest
        cost, iterations = rows.run_spend(db, run_id)
        scope = f"run {run_id}, {status}"
        limits = config.budget
        found.insert(0, BudgetUse("budget.max_cost_usd", scope, cost, limits.max_cost_usd, "usd"))
        tokens, most_tokens = calls.run_tokens(db, run_id), limits.max_tokens_per_run
        found.append(
            BudgetUse(
                "budget.max_tokens_per_run", scope, tokens, most_tokens, "tokens", most_tokens == 0
            )
        )
        most = config.loop.max_iterations
        found.append(BudgetUse("loop.max_iterations", scope, iterations, most, "iterations"))
    last = rows.last_iteration_tokens(db)
    if last is not None:
        number, tokens = last
        found.append(
            BudgetUse(
                "budget.max_tokens_per_iteration",
                f"iteration {number}",
                tokens,
                config.budget.max_tokens_per_iteration,
                "tokens",
            )
        )
    return found


def budget_lines(config: Config, db: Database) -> list[str]:
    """One line per budget: its key, use, limit and scope (for `soda status`)."""
    return [use.line() for use in uses(config, db)]


def spent_budget(config: Config, db: Database) -> BudgetUse | None:
    """The first budget that is spent (the next run would stop on it), or None."""
    return next((use for use in uses(config, db) if use.spent), None)


def check(
    config: Config, db: Database, run_cost: float, iteration_tokens: int, run_tokens: int = 0
) -> None:
    """Raise BudgetExhausted if the day's, this run's or this iteration's budget
    is passed, naming it and how to raise or reset it."""
    limits = config.budget
    if 0 < limits.max_tokens_per_run < run_tokens:
        raise BudgetExhausted(run_tokens_spent(run_tokens, limits.max_tokens_per_run))
    if run_cost > limits.max_cost_usd:
        raise BudgetExhausted(
            f"budget exhausted: spent ${run_cost:.4f} of max_cost_usd ${limits.max_cost_usd:.4f}"
            " in this run (one `soda run` or daemon wake); raise [budget] max_cost_usd in"
            " soda.toml, or start again: the next run or wake counts from 0"
        )
    day = day_use(config, db)
    if day.spent:
        raise BudgetExhausted(exhausted_today(day))
    if iteration_tokens > limits.max_tokens_per_iteration:
        raise BudgetExhausted(
            f"budget exhausted: this iteration used {iteration_tokens:,} tokens, over "
            f"max_tokens_per_iteration {limits.max_tokens_per_iteration:,}; raise [budget]"
            " max_tokens_per_iteration in soda.toml"
        )


def check_before_iteration(config: Config, db: Database) -> None:
    """Refuse to start an iteration when today's budget, or the run's tokens, are
    already spent: no model call is made just to learn it."""
    day = day_use(config, db)
    if day.spent:
        raise BudgetExhausted(exhausted_today(day))
    most = config.budget.max_tokens_per_run
    latest = rows.latest_run(db)
    if most and latest is not None:
        used = calls.run_tokens(db, latest[0])
        if used > most:
            raise BudgetExhausted(run_tokens_spent(used, most))


def run_tokens_spent(used: int, most: int) -> str:
    return (
        f"budget exhausted: this run used {used:,} tokens, over max_tokens_per_run"
        f" {most:,}; raise [budget] max_tokens_per_run in soda.toml, or start again:"
        " the next run or wake counts from 0"
    )


def exhausted_today(day: BudgetUse) -> str:
    return (
        f"budget exhausted: spent ${day.used:.4f} today of max_cost_usd_per_day"
        f" ${day.limit:.4f}; raise [budget] max_cost_usd_per_day in soda.toml, run"
        " `soda budget reset` to count today's spend from now, or wait for midnight"
    )


def reset_day(db: Database) -> None:
    """`soda budget reset`: today's spend counts from the next model call."""
    rows.add_reset(db, DAY)
