"""What a host does after one iteration: a pure function of how it ended.

Three hosts step the loop: `soda run` in the foreground, the daemon in the
background, and the fleet's workflow on Temporal. Each asks `after` what comes
next and does it: step again, idle until a person writes, wait for a person or
for a verdict on what waits for approval, retry later, or end. Where the hosts
differ, the table says so, one row per host, and nowhere else:

    ending       foreground       daemon              fleet
    CONTINUE     again (--once:   again               again
                 end)
    DONE         end              idle, notify        end, notify (again while
                                                      a person's input waits)
    STUCK        end              idle, notify        wait for a person, notify
                                                      (for a verdict when a plan
                                                      or merge waits for approval)
    HALT         end              idle, notify        wait for a person, notify
    TRANSIENT    end (exit 5)     retry at the next   retry after a wait
                                  tick, the run open
    INTERRUPTED  end              end                 again (the worker was
                                                      stopped; a person's stop
                                                      is the workflow's flag)

The foreground tells its person by its last line and exit code, so it runs no
`notify_command`. The run's record closes unless the run goes on: after a
CONTINUE stepped again, and in the daemon's transient retry (a fleet run that
goes on after DONE starts another record on its worker).

No I/O and no soda import beyond the vocabularies: the fleet's workflow imports
it inside Temporal's sandbox. `tests/test_policy.py` is its table.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from soda.contracts.outcomes import Ending


class Host(StrEnum):
    """Who steps the loop."""

    FOREGROUND = "foreground"
    """`soda run` (and `soda demo`): ends where the others wait."""
    DAEMON = "daemon"
    """`soda start`: one machine, woken by files and ticks."""
    FLEET = "fleet"
    """A fleet run: a Temporal workflow placing each iteration on a worker."""


class Next(StrEnum):
    """What the host does next."""

    AGAIN = "again"
    """Step again at once."""
    IDLE = "idle"
    """No iteration until a person writes (or the spec or the pull request changes)."""
    WAIT_FOR_PERSON = "wait_for_person"
    """Hold no worker until a person writes or resumes the run."""
    WAIT_FOR_VERDICT = "wait_for_verdict"
    """A plan or merge waits for approval: until a verdict or its deadline."""
    RETRY_LATER = "retry_later"
    """A transient failure: step again after a while."""
    END = "end"
    """The host's run is over."""


@dataclass(frozen=True)
class After:
    """The policy's answer for one iteration's ending."""

    next: Next
    close_run: bool
    """Close the run's record now, with the ending's `run_status`."""
    notify: bool
    """Run `[daemon] notify_command` (DONE, STUCK, HALT; never fatal)."""


PERSON_ENDINGS = frozenset({Ending.DONE, Ending.STUCK, Ending.HALT})
"""Endings a person hears of (`notify_command`) from a host that runs unattended."""


def after(
    host: Host,
    ending: Ending,
    *,
    once: bool = False,
    suspended: bool = False,
    inputs_waiting: bool = False,
) -> After:
    """What `host` does after an iteration that ended `ending`. `once`: the
    foreground was asked for one iteration. `suspended`: the iteration ended
    STUCK with a plan or merge held for approval (its wait is a timer's).
    `inputs_waiting`: a person wrote since the iteration began (the fleet goes on
    after DONE rather than end with their input unread)."""
    notify = host is not Host.FOREGROUND and ending in PERSON_ENDINGS
    step = _next(host, ending, once, suspended, inputs_waiting)
    goes_on = ending is Ending.CONTINUE and step is Next.AGAIN
    keeps_run = goes_on or (host is Host.DAEMON and step is Next.RETRY_LATER)
    return After(step, not keeps_run, notify)


def _next(host: Host, ending: Ending, once: bool, suspended: bool, inputs_waiting: bool) -> Next:
    if ending is Ending.CONTINUE:
        return Next.END if host is Host.FOREGROUND and once else Next.AGAIN
    if ending is Ending.INTERRUPTED:
        return Next.AGAIN if host is Host.FLEET else Next.END
    if host is Host.FOREGROUND:
        return Next.END
    if ending is Ending.TRANSIENT:
        return Next.RETRY_LATER
    if host is Host.DAEMON:
        return Next.IDLE
    if ending is Ending.DONE:
        return Next.AGAIN if inputs_waiting else Next.END
    if ending is Ending.STUCK and suspended:
        return Next.WAIT_FOR_VERDICT
    return Next.WAIT_FOR_PERSON
