"""The forges soda speaks to: one registry keyed by `[forge] kind`, the only
list of their names.

Each entry builds its `Forge` (`port.py`) from `[forge]`, the token, the
repository ("owner/name") and the database that keeps its ETags. `[forge] kind`
is a Literal of soda.config (below this room, so pydantic refuses an unknown
name when soda.toml loads: one line, exit 2), checked against this registry on
import, as every kind is checked to be named in its docstring.

Adding a forge: its module in `soda/forge/` implementing `Forge`, one entry
here, and its name in the `[forge] kind` Literal and docstring.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import get_args

from sqlite_utils import Database

from soda.config import ForgeConfig
from soda.errors import ConfigError
from soda.forge.github import connect_github
from soda.forge.port import Forge
from soda.system.clock import Clock


@dataclass(frozen=True)
class ForgeKind:
    """One forge: how to build it, and how messages name it."""

    name: str
    """The `[forge] kind` value that chooses it."""
    build: Callable[[ForgeConfig, str, str, Database, Clock], Forge]
    """(`[forge]`, token, "owner/name", database, clock) -> the forge."""
    label: str


FORGES: dict[str, ForgeKind] = {
    kind.name: kind for kind in (ForgeKind("github", connect_github, "GitHub"),)
}


def forge_for(name: str) -> ForgeKind:
    """The registry's entry for `name`; ConfigError naming the key and the known names."""
    kind = FORGES.get(name)
    if kind is None:
        known = ", ".join(FORGES)
        raise ConfigError(f"soda.toml: forge.kind: unknown forge {name!r} (known: {known})")
    return kind


def _check_registry() -> None:
    literal = set(get_args(ForgeConfig.model_fields["kind"].annotation))
    if literal != set(FORGES):
        raise RuntimeError(f"[forge] kind out of step with FORGES: {literal ^ set(FORGES)}")
    described = ForgeConfig.model_fields["kind"].description or ""
    missing = [name for name in FORGES if f'"{name}"' not in described]
    if missing:
        raise RuntimeError(f"forges missing from the [forge] kind docstring: {missing}")


_check_registry()
