"""What a request handler reads: the project's config and database, the CLI's
reports (handed in: they live above this room), and the server's guard."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlite_utils import Database

from soda.config import Config
from soda.web.security import Guard

Report = Callable[[], dict[str, Any]]


@dataclass(frozen=True)
class Reports:
    """The JSON the CLI's read commands print, computed by their own code: the
    pages show exactly what `soda status`, `history` and `show` say."""

    status: Report
    """`soda status --json`."""
    history: Callable[[int], dict[str, Any]]
    """`soda history --json --limit N`."""
    iteration: Callable[[int], dict[str, Any]]
    """`soda show N --json` (InputError when there is no such iteration)."""


@dataclass(frozen=True)
class Site:
    """One server's world: lives as long as the process."""

    config: Config
    db: Database
    milestone: str
    """The milestone whose Trace tasks the Tasks page shows."""
    reports: Reports
    guard: Guard
