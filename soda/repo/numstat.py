"""`git diff --numstat` rows for the milestone's digest: read from the object
database for a file only one side has (its lines counted as git counts them,
binary as git's `diff` attribute and NUL test decide), asked of git for the
rest in one process (`numstat`), and git's own output parsed (`parse_numstat`)."""

from __future__ import annotations

import contextlib
import re

from git import Repo

from soda.errors import GitError
from soda.repo import helpers, objects
from soda.repo.objects import Change, Entry, Undecided, entry_at, tree_of
from soda.repo.refs import _git

PAIRED = ("R", "C")
"""The raw diff's letters of a rename and a copy (a row with a source)."""

Row = tuple[str, str, int, int, bool, str, str | None]
"""A file of `git diff --numstat base tip`: (path, shown, added, removed,
binary, status, source). `path` is the file's own name (the destination of a
rename), `shown` the name as numstat prints it (quoted, `a => b`), `status` the
raw diff's letter (A, D, M, T, R, C), `source` a rename's or copy's origin."""


def numstat(repo: Repo, base: str, head: str, changes: list[Change], generation: str) -> list[Row]:
    """The rows of `git diff --raw --numstat --no-renames BASE TIP -- PATHS` for
    the paths `changes` names (each with its entry in the tip). A file the base
    lacks (added) or the tip lacks (deleted) is read from the object database:
    its row is its line count, or binary, as git's diff decides for that path
    (`_added_lines`). Any other (both sides present, a symlink, a submodule, a
    name git would quote, an attribute that runs a program) is asked of git, all
    of them in one `git diff`. Without --no-renames each row stands alone, so
    the two kinds of row mix freely."""
    base_tree = tree_of(repo, base)
    rows: list[Row] = []
    ask: list[str] = []
    for change in changes:
        path = change.path
        before = entry_at(repo, base_tree, path)
        after = change.new
        if before == after:
            continue  # changed back to what the base has: no row
        row = None
        with contextlib.suppress(Undecided, GitError):
            if before is None and after is not None:
                row = _one_side(repo, path, after, "A", generation)
            elif after is None and before is not None:
                row = _one_side(repo, path, before, "D", generation)
        if row is None:
            ask.append(path)
        else:
            rows.append(row)
    if ask:
        rows += parse_numstat(
            _git(repo, "--literal-pathspecs", "diff", "--raw", "--numstat", "--no-renames",
                 base, head, "--", *ask)
        )  # fmt: skip
    return rows


REGULAR = (0o100644, 0o100755)
_PLAIN = re.compile(r"[ -!#-\[\]-~]+")
"""Printable ASCII but `"` and `\\`: a name git's numstat shows as it is."""
FIRST_FEW_BYTES = 8000
"""git looks for a NUL byte this far into a file to call it binary."""


def _one_side(repo: Repo, path: str, entry: Entry, status: str, generation: str) -> Row | None:
    """The numstat row of a regular file only one side of the diff has: all its
    lines added (status A) or removed (D); None when git must say."""
    if entry[0] not in REGULAR or not _PLAIN.fullmatch(path):
        return None
    lines = _added_lines(repo, path, entry[1], generation)
    if lines is None:
        return None
    count, binary = lines
    added, removed = (count, 0) if status == "A" else (0, count)
    return (path, path, added, removed, binary, status, None)


def _added_lines(repo: Repo, path: str, blob: str, generation: str) -> tuple[int, bool] | None:
    """(lines, binary) of blob `blob` at `path` as git's numstat counts a file
    that is all added or all removed: binary when the path's `diff` attribute
    is unset, or (unspecified, or a driver that says nothing of it) when a NUL
    byte is among the first 8,000 bytes or the blob is larger than
    core.bigFileThreshold; else its lines, the last one counted even without
    its newline. None (ask git) for a driver with a textconv program or its
    own `binary` setting."""
    attribute = helpers.diff_attribute(repo, path, generation)
    if attribute == "unset":
        return 0, True
    found = helpers.settings(repo)
    if attribute not in ("set", "unspecified") and (
        found.get(f"diff.{attribute}.textconv") is not None
        or found.get(f"diff.{attribute}.binary") is not None
    ):
        return None
    threshold = _size(found.get("core.bigfilethreshold"))
    if threshold is None:
        return None
    data = objects.read(repo, blob, "blob")
    if attribute != "set" and (len(data) > threshold or b"\0" in data[:FIRST_FEW_BYTES]):
        return 0, True
    return count_lines(data), False


def count_lines(data: bytes) -> int:
    """git's count_lines: newlines, plus one for a last line without one."""
    if not data:
        return 0
    return data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def _size(value: str | None) -> int | None:
    """core.bigFileThreshold in bytes (default 512 MiB); None when unreadable."""
    if value is None:
        return 512 * 1024**2
    match = re.fullmatch(r"\s*(\d+)\s*([kmgKMG]?)\s*", value)
    if match is None:
        return None
    return int(match[1]) * _UNITS[match[2].lower()]


def parse_numstat(output: str) -> list[Row]:
    """Rows from `git diff --raw --numstat` (raw lines first, then as many numstat
    lines, in the same order)."""
    lines = output.splitlines()
    raw = [line for line in lines if line.startswith(":")]
    stats = [line for line in lines if line and not line.startswith(":")]
    if len(raw) != len(stats):
        raise GitError("git diff --raw --numstat gave unmatched lines")
    rows: list[Row] = []
    for meta, stat in zip(raw, stats, strict=True):
        fields, *names = meta.split("\t")
        status = fields.split()[-1][:1]
        paths = [unquote(name) for name in names]
        plus, minus, shown = stat.split("\t", 2)
        binary = plus == "-"
        rows.append(
            (
                paths[-1],
                shown,
                0 if binary else int(plus),
                0 if binary else int(minus),
                binary,
                status,
                paths[0] if status in PAIRED else None,
            )
        )
    return rows


_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def unquote(name: str) -> str:
    """A path as git prints it (C-style quoted when it has special characters)."""
    if not (name.startswith('"') and name.endswith('"') and len(name) >= 2):
        return name
    out = bytearray()
    text = name[1:-1]
    i = 0
    while i < len(text):
        char = text[i]
        if char != "\\":
            out += char.encode()
            i += 1
        elif text[i + 1 : i + 4].isdigit() and len(text[i + 1 : i + 4]) == 3:
            out.append(int(text[i + 1 : i + 4], 8))
            i += 4
        else:
            out.append(_ESCAPES.get(text[i + 1 : i + 2], ord(text[i + 1 : i + 2] or "\\")))
            i += 2
    return out.decode("utf-8", errors="surrogateescape")
