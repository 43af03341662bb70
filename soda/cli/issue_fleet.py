"""How the CLI reaches the fleet `[tracker] fleet` names (soda.fleet.issues, on
Temporal): `soda issues sync` and the daemon (`soda start`) hand it to
soda.daemon.issue_fleet, which may not import the fleet itself."""

from __future__ import annotations

import importlib

from soda.config import Config
from soda.daemon.issue_fleet import Fleet
from soda.errors import InputError


def fleet_of(config: Config) -> Fleet:
    """The fleet `[tracker] fleet` names, or one line saying how to install the
    fleet extra."""
    try:
        module = importlib.import_module("soda.fleet.issues")
    except ImportError as exc:
        raise InputError(
            f"soda.toml: tracker.fleet needs the fleet extra ({exc.name} is missing):"
            " pip install 'soda-daemon[fleet]'"
        ) from exc
    fleet: Fleet = module.TemporalFleet(config.tracker.fleet or "", config.tracker.fleet_namespace)
    return fleet
