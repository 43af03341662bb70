"""Working windows (`[daemon] windows`, cron expressions): when a host may start
an iteration. The daemon checks them at each tick; the fleet's worker before it
takes up an iteration, the workflow then waiting for the next one to open."""

from __future__ import annotations

from datetime import datetime

from apscheduler.triggers.cron import CronTrigger

from soda.errors import ConfigError


def parse_windows(expressions: list[str]) -> list[CronTrigger]:
    triggers = []
    for index, expression in enumerate(expressions):
        try:
            triggers.append(CronTrigger.from_crontab(expression))
        except ValueError as exc:
            raise ConfigError(
                f"soda.toml: daemon.windows[{index}]: {exc} ({expression!r})"
            ) from exc
    return triggers


def in_window(triggers: list[CronTrigger], moment: datetime) -> bool:
    """True when `moment`'s minute matches one of the cron expressions (or none are set)."""
    if not triggers:
        return True
    minute = moment.astimezone().replace(second=0, microsecond=0)
    return any(trigger.get_next_fire_time(None, minute) == minute for trigger in triggers)


def next_open(triggers: list[CronTrigger], moment: datetime) -> datetime | None:
    """When the next window after `moment` opens (None: none ever does)."""
    moment = moment.astimezone()
    times = [trigger.get_next_fire_time(None, moment) for trigger in triggers]
    return min((t for t in times if t is not None), default=None)
