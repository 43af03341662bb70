"""What a host does after an iteration is pure: every host and ending, as a table."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import soda.loop.policy
from soda.contracts.outcomes import Ending
from soda.loop.policy import After, Host, Next, after

F, D, L = Host.FOREGROUND, Host.DAEMON, Host.FLEET
AGAIN, IDLE, PERSON, VERDICT, RETRY, END = (
    Next.AGAIN,
    Next.IDLE,
    Next.WAIT_FOR_PERSON,
    Next.WAIT_FOR_VERDICT,
    Next.RETRY_LATER,
    Next.END,
)

# (host, ending, flags, next, close the run, notify)
TABLE: list[tuple[Host, Ending, dict[str, bool], Next, bool, bool]] = [
    (F, Ending.CONTINUE, {}, AGAIN, False, False),
    (F, Ending.CONTINUE, {"once": True}, END, True, False),
    (F, Ending.DONE, {}, END, True, False),
    (F, Ending.STUCK, {}, END, True, False),
    (F, Ending.STUCK, {"suspended": True}, END, True, False),
    (F, Ending.HALT, {}, END, True, False),
    (F, Ending.TRANSIENT, {}, END, True, False),
    (F, Ending.INTERRUPTED, {}, END, True, False),
    (D, Ending.CONTINUE, {}, AGAIN, False, False),
    (D, Ending.CONTINUE, {"once": True}, AGAIN, False, False),
    (D, Ending.DONE, {}, IDLE, True, True),
    (D, Ending.DONE, {"inputs_waiting": True}, IDLE, True, True),
    (D, Ending.STUCK, {}, IDLE, True, True),
    (D, Ending.STUCK, {"suspended": True}, IDLE, True, True),
    (D, Ending.HALT, {}, IDLE, True, True),
    (D, Ending.TRANSIENT, {}, RETRY, False, False),
    (D, Ending.INTERRUPTED, {}, END, True, False),
    (L, Ending.CONTINUE, {}, AGAIN, False, False),
    (L, Ending.DONE, {}, END, True, True),
    (L, Ending.DONE, {"inputs_waiting": True}, AGAIN, True, True),
    (L, Ending.STUCK, {}, PERSON, True, True),
    (L, Ending.STUCK, {"suspended": True}, VERDICT, True, True),
    (L, Ending.HALT, {}, PERSON, True, True),
    (L, Ending.HALT, {"suspended": True}, PERSON, True, True),
    (L, Ending.TRANSIENT, {}, RETRY, True, False),
    (L, Ending.INTERRUPTED, {}, AGAIN, True, False),
]


@pytest.mark.parametrize(
    ("host", "ending", "flags", "step", "close", "notify"),
    TABLE,
    ids=[f"{h}-{e}-{'-'.join(f) or 'plain'}" for h, e, f, *_ in TABLE],
)
def test_after(
    host: Host, ending: Ending, flags: dict[str, bool], step: Next, close: bool, notify: bool
) -> None:
    assert after(host, ending, **flags) == After(step, close, notify)


def test_every_host_and_ending_has_a_row() -> None:
    assert {(h, e) for h, e, *_ in TABLE} == {(h, e) for h in Host for e in Ending}


def test_unattended_hosts_tell_a_person_of_every_ending_that_needs_one() -> None:
    for host in (D, L):
        told = {e for e in Ending if after(host, e).notify}
        assert told == {Ending.DONE, Ending.STUCK, Ending.HALT}, host


def test_it_imports_nothing_that_does_io() -> None:
    """The fleet's workflow imports it in Temporal's sandbox: only the standard
    library's pure parts and soda's vocabularies."""
    tree = ast.parse(Path(soda.loop.policy.__file__).read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found.add(node.module or "")
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    assert found == {"__future__", "dataclasses", "enum", "soda.contracts.outcomes"}
