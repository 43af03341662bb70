"""Saying something to soda: `write_input` drops an input into the inbox (what
`soda tell`, `approve`, `pause`... do), and `describe` renders one as the line a
person or an ORIENT prompt reads."""

from __future__ import annotations

import json
import os
import re
import secrets
from datetime import UTC, datetime
from pathlib import Path

from soda.contracts import HumanInput
from soda.human.parse import document, one_line

WRITTEN_BY_SODA = re.compile(
    r"^\d{8}T\d{12}Z-[a-z_]+-[0-9a-f]{6}"
    r"(?:\.(?P<source>web|fleet|mcp)(?:\.(?P<who>[a-z0-9][a-z0-9_-]{0,39}))?)?\.json$"
)
"""Names `write_input` gives its files (they arrive whole, by rename); a face
other than the CLI adds its name before `.json` (`SOURCES`), and after it who
spoke through it, when the face knows (an MCP client's name)."""

INBOX = "inbox"
"""The provenance of what came through the inbox: a person's own file or a CLI command."""
SOURCES = frozenset({"web", "fleet", "tracker", "mcp"})
"""Faces that name themselves in their inputs' provenance (the `source` column):
the web dashboard, `soda fleet` (its inputs written by the worker holding the run),
the forge's issue tracker (a writer's comment on an issue soda works on) and
`soda mcp serve` (a person's MCP client: `mcp:CLIENT`)."""

_NOT_IN_NAME = re.compile(r"[^a-z0-9_-]+")


def who_slug(who: str | None) -> str | None:
    """`who` as it can appear in an inbox file's name (lower case, letters,
    digits, `-` and `_`, at most 40), None when nothing of it is left."""
    slug = _NOT_IN_NAME.sub("-", (who or "").lower()).strip("-_")[:40].strip("-_")
    return slug or None


def source_of(name: str) -> str:
    """The provenance of inbox file `name`: the face `write_input` was told
    (`face:who` when it said who), else `INBOX`."""
    match = WRITTEN_BY_SODA.match(name)
    if not match or not match["source"]:
        return INBOX
    return f"{match['source']}:{match['who']}" if match["who"] else match["source"]


def inbox_dir(state_dir: Path) -> Path:
    """Where the person's files land: the one definition of the inbox's place."""
    return state_dir / "inbox"


def write_input(
    state_dir: Path, item: HumanInput, source: str | None = None, who: str | None = None
) -> Path:
    """Drop `item` into the inbox atomically and return its path; `source` (one
    of `SOURCES`, e.g. "web") is the face it came through, its recorded provenance,
    with `who` (`who_slug`) after it when the face says who spoke.

    The temporary name starts with a dot, which ingest ignores, so a reader never
    sees half a file; works whether or not a daemon is running.
    """
    if source is not None and source not in SOURCES:
        raise ValueError(f"unknown input source {source!r}")
    inbox = inbox_dir(state_dir)
    inbox.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    slug = who_slug(who) if source else None
    face = (f".{source}" if source else "") + (f".{slug}" if slug else "")
    name = f"{stamp}-{item.kind}-{secrets.token_hex(3)}{face}.json"
    temp = inbox / f".{name}.tmp"
    body = json.dumps(document(item), indent=2) + "\n"
    with temp.open("w", encoding="utf-8") as fh:
        fh.write(body)
        fh.flush()
        os.fsync(fh.fileno())
    final = inbox / name
    os.replace(temp, final)
    _fsync_dir(inbox)
    return final


def _fsync_dir(path: Path) -> None:
    # Makes the rename itself durable; not every platform lets a directory be fsynced.
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def describe(item: HumanInput) -> str:
    """One line for a prompt, e.g. "override: close task #4"."""
    text = one_line(item.text or "", limit=300)
    why = f" ({text})" if text else ""
    if item.kind == "correction":
        return f"correction: {text}"
    if item.kind == "override":
        if item.action == "constraint":
            return f"override: add constraint: {text}"
        return f"override: {item.action} task #{item.task_id}{why}"
    if item.kind == "spec_change":
        mode = f" ({item.mode})" if item.mode else ""
        return f"spec change{mode}: {text}"
    if item.kind in ("approve", "reject"):
        return f"{item.kind}: plan of iteration {item.target}{why}"
    return f"{item.kind}{why}"
