"""File tools inside a sandbox: read, list, search (read-only) and write, edit.

Every path goes through `Sandbox.resolve`; every answer is capped so one call
cannot flood the model's context, and a cut answer says how to get the rest.

Listing and searching show the files git would: when the directory is inside a
git checkout, the files come from `git ls-files --cached --others
--exclude-standard` (tracked, plus untracked files `.gitignore` does not exclude),
so `node_modules`, build output and virtualenvs are never walked. Outside git,
or for a directory that is itself ignored (named on purpose), they come from a
walk of the tree. Either way each file still passes the sandbox's checks.

Only regular files are ever opened. A FIFO, socket or device in the tree would
block a reader forever (or do something on open), so reading refuses them and
listing and searching skip them; every open is also O_NONBLOCK and re-checked
with fstat, in case one is swapped in after the check. Writes refuse a file with
more than one hard link: resolving the path cannot see where the other links
are, and one may be outside the working directory (linked in by a command).
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from pathlib import Path
from typing import IO

from soda.llm.base import ToolSpec
from soda.tools.listing import tree_files
from soda.tools.sandbox import Sandbox, ToolError
from soda.tools.toolbox import Tool, object_schema

MAX_READ_LINES = 2000
MAX_READ_CHARS = 100_000
MAX_LINE_CHARS = 4000
MAX_LIST_ENTRIES = 500
MAX_MATCHES = 200
MAX_MATCH_CHARS = 300
MAX_SEARCH_BYTES = 5_000_000
"""Files larger than this are skipped by search_text (they are data, not code)."""


_CLOEXEC = getattr(os, "O_CLOEXEC", 0)

"""Characters of a git listing kept: all of it (this only bounds a runaway)."""
# Hardened like every git soda starts (no fsmonitor, no hooks); no optional locks,
# so listing never takes index.lock under a running orchestrator.

# Patterns whose match on one line might not be a match somewhere in the whole
# text (they look at string ends, behind, or assert an absence), so search_text
# cannot skip a file just because the whole text does not match.
_LINE_BOUND = ("$", "\\A", "\\Z", "\\z", "\\B", "(?<", "(?!", "(?-")

NULLABLE_STRING = {"type": ["string", "null"]}
NULLABLE_INTEGER = {"type": ["integer", "null"]}


def reading_tools(sandbox: Sandbox) -> list[Tool]:
    return [
        Tool(
            ToolSpec(
                "read_file",
                "Read a text file, with line numbers. Reads up to 2000 lines from offset_line "
                "(1-based; null means 1); max_lines null means as many as fit.",
                object_schema(
                    {
                        "path": {"type": "string"},
                        "offset_line": NULLABLE_INTEGER,
                        "max_lines": NULLABLE_INTEGER,
                    }
                ),
            ),
            lambda a: read_file(sandbox, a["path"], a["offset_line"], a["max_lines"]),
        ),
        Tool(
            ToolSpec(
                "list_files",
                "List files under a directory (null means the working directory), recursively. "
                "pattern is a glob: without '/' it matches file names ('*.py'), with '/' "
                "it matches paths relative to the directory ('src/**/*.py').",
                object_schema({"path": NULLABLE_STRING, "pattern": NULLABLE_STRING}),
            ),
            lambda a: list_files(sandbox, a["path"], a["pattern"]),
        ),
        Tool(
            ToolSpec(
                "search_text",
                "Search file contents with a Python regular expression. path is a file or "
                "directory (null means everything); glob filters file names like "
                "list_files' pattern. Answers 'path:line: text' for each matching line.",
                object_schema(
                    {
                        "pattern": {"type": "string"},
                        "path": NULLABLE_STRING,
                        "glob": NULLABLE_STRING,
                    }
                ),
            ),
            lambda a: search_text(sandbox, a["pattern"], a["path"], a["glob"]),
        ),
    ]


def writing_tools(sandbox: Sandbox) -> list[Tool]:
    return [
        Tool(
            ToolSpec(
                "write_file",
                "Create or overwrite a file with exactly this content; creates missing "
                "parent directories. Prefer edit_file for changing part of a file.",
                object_schema({"path": {"type": "string"}, "content": {"type": "string"}}),
            ),
            lambda a: write_file(sandbox, a["path"], a["content"]),
        ),
        Tool(
            ToolSpec(
                "edit_file",
                "Replace the exact text `old` with `new` in a file. `old` must occur exactly "
                "once: include enough surrounding lines to make it unique.",
                object_schema(
                    {
                        "path": {"type": "string"},
                        "old": {"type": "string"},
                        "new": {"type": "string"},
                    }
                ),
            ),
            lambda a: edit_file(sandbox, a["path"], a["old"], a["new"]),
        ),
    ]


def read_file(sandbox: Sandbox, path: str, offset_line: int | None, max_lines: int | None) -> str:
    target = _existing_text_file(sandbox, path)
    first = 1 if offset_line is None else offset_line
    wanted = MAX_READ_LINES if max_lines is None else min(max_lines, MAX_READ_LINES)
    if first < 1 or wanted < 1:
        raise ToolError("offset_line and max_lines must be at least 1")
    shown: list[str] = []
    chars, total = 0, 0
    with _open_text(target, path, errors="replace", newline="") as f:
        for total, line in enumerate(f, start=1):
            if total < first or len(shown) >= wanted or chars >= MAX_READ_CHARS:
                continue  # keep counting: the note says how long the file is
            text = _clip(line.rstrip("\r\n"), MAX_LINE_CHARS)
            numbered = f"{total:>6}\t{text}"
            shown.append(numbered)
            chars += len(numbered) + 1
    if total == 0:
        return f"({path} is empty)"
    if first > total:
        raise ToolError(f"offset_line {first} is past the end of {path} ({total} lines)")
    last = first + len(shown) - 1
    if last < total:
        shown.append(
            f"[showing lines {first}-{last} of {total}; read on with offset_line={last + 1}]"
        )
    return "\n".join(shown)


def list_files(sandbox: Sandbox, path: str | None, pattern: str | None) -> str:
    start = _existing_dir(sandbox, path)
    found = sorted(
        sandbox.relative(file)
        for file in tree_files(sandbox, start)
        if pattern is None or _matches(file.relative_to(start).as_posix(), pattern)
    )
    if not found:
        return "(no files found)"
    if len(found) > MAX_LIST_ENTRIES:
        more = len(found) - MAX_LIST_ENTRIES
        return "\n".join(
            [
                *found[:MAX_LIST_ENTRIES],
                f"[showing {MAX_LIST_ENTRIES} of {len(found)} files, {more} more; narrow path "
                "or pattern (e.g. '*.py'), or call repo_map for an overview]",
            ]
        )
    return "\n".join(found)


def search_text(sandbox: Sandbox, pattern: str, path: str | None, glob: str | None) -> str:
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ToolError(f"invalid regular expression {pattern!r}: {exc}") from exc
    target = sandbox.resolve(path or ".")
    if not target.exists():
        raise ToolError(f"{path} does not exist")
    # Anything but a directory is searched as one file: a FIFO or device named as
    # the path is refused when opened, and counts as no match.
    base = target if target.is_dir() else target.parent
    files = tree_files(sandbox, target) if target.is_dir() else [target]
    whole = _whole_text_regex(pattern)
    hits: list[str] = []
    skipped = 0
    for file in files:
        if glob is not None and not _matches(file.relative_to(base).as_posix(), glob):
            continue
        try:
            if file.stat().st_size > MAX_SEARCH_BYTES:
                skipped += 1
                continue
            hits.extend(_search_file(sandbox, file, regex, whole, MAX_MATCHES + 1 - len(hits)))
        except (OSError, ToolError):
            continue  # a dangling link, an unreadable or irregular file: nothing to search
        if len(hits) > MAX_MATCHES:
            break
    return _search_report(hits, skipped)


def write_file(sandbox: Sandbox, path: str, content: str) -> str:
    target = sandbox.resolve(path)
    if target.is_dir():
        raise ToolError(f"{path} is a directory")
    existed = target.exists()
    if existed:
        _check_writable(target.stat(), path)  # refuse before opening anything
    target.parent.mkdir(parents=True, exist_ok=True)
    _write_text(target, path, content)
    verb = "overwrote" if existed else "created"
    return f"{verb} {sandbox.relative(target)} ({len(content)} characters)"


def edit_file(sandbox: Sandbox, path: str, old: str, new: str) -> str:
    if not old:
        raise ToolError("old must not be empty; use write_file to create a file")
    target = _existing_text_file(sandbox, path)
    _check_writable(target.stat(), path)
    try:
        with _open_text(target, path, errors="strict", newline="") as f:
            text = f.read()
    except UnicodeDecodeError as exc:
        raise ToolError(f"{path} is not UTF-8 text; edit_file cannot change it safely") from exc
    count = text.count(old)
    if count == 0:
        raise ToolError(f"old text not found in {path}; read the file and copy it exactly")
    if count > 1:
        raise ToolError(
            f"old text occurs {count} times in {path}; include more surrounding lines "
            "so that it occurs exactly once"
        )
    _write_text(target, path, text.replace(old, new, 1))
    return f"edited {sandbox.relative(target)}: replaced 1 occurrence"


def _existing_text_file(sandbox: Sandbox, path: str) -> Path:
    target = sandbox.resolve(path)
    if target.is_dir():
        raise ToolError(f"{path} is a directory; use list_files")
    if not target.exists():
        raise ToolError(f"{path} does not exist")
    if not target.is_file():
        raise ToolError(f"{path} is not a regular file")
    if _is_binary(target, path):
        raise ToolError(f"{path} is a binary file")
    return target


def _existing_dir(sandbox: Sandbox, path: str | None) -> Path:
    target = sandbox.resolve(path or ".")
    if not target.is_dir():
        raise ToolError(f"{path} is not a directory")
    return target


def _matches(rel: str, pattern: str) -> bool:
    if "/" not in pattern:
        return fnmatch.fnmatch(rel.rsplit("/", 1)[-1], pattern)
    if fnmatch.fnmatch(rel, pattern):
        return True
    # '**/x' should also match x at the top, as in a shell with globstar.
    return pattern.startswith("**/") and _matches(rel, pattern[3:])


def _whole_text_regex(pattern: str) -> re.Pattern[str] | None:
    """`pattern` for a whole file at once (^ and $ at every line), when a match on
    any one line implies a match in the whole text: then a file the whole-text
    search misses is skipped without splitting it into lines. None otherwise."""
    if any(token in pattern for token in _LINE_BOUND):
        return None
    try:
        return re.compile(pattern, re.MULTILINE)
    except re.error:
        return None


def _search_file(
    sandbox: Sandbox,
    file: Path,
    regex: re.Pattern[str],
    whole: re.Pattern[str] | None,
    room: int,
) -> list[str]:
    """Matching lines of one file, line by line as a text file reads (universal
    newlines, each line ending in its newline); read in one go, and skipped at once when
    `whole` says nothing in it can match."""
    rel = sandbox.relative(file)
    if room <= 0:
        return []
    with open(open_regular(file, rel), "rb") as f:
        data = f.read()
    if b"\0" in data[:8192]:
        return []  # binary
    text = data.decode("utf-8", errors="replace")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if whole is not None and whole.search(text) is None:
        return []
    hits: list[str] = []
    start, number = 0, 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end + 1
        line = text[start:end]
        start, number = end, number + 1
        if regex.search(line):
            hits.append(f"{rel}:{number}: {_clip(line.strip(), MAX_MATCH_CHARS)}")
            if len(hits) >= room:
                break
    return hits


def _search_report(hits: list[str], skipped: int) -> str:
    lines = hits[:MAX_MATCHES] or ["(no matches)"]
    if len(hits) > MAX_MATCHES:
        lines.append(f"[stopped at {MAX_MATCHES} matches; narrow the pattern, path or glob]")
    if skipped:
        lines.append(f"[skipped {skipped} files over {MAX_SEARCH_BYTES:,} bytes]")
    return "\n".join(lines)


def _is_binary(path: Path, shown: str) -> bool:
    with open(open_regular(path, shown), "rb") as f:
        return b"\0" in f.read(8192)


def open_regular(path: Path, shown: str) -> int:
    """A read-only descriptor for `path`, refused unless it is a regular file.
    O_NONBLOCK: opening a FIFO swapped in after the caller's checks returns at
    once instead of waiting for a writer, and fstat then refuses it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _CLOEXEC)
    except OSError as exc:
        raise ToolError(f"cannot open {shown}: {exc.strerror}") from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ToolError(f"{shown} is not a regular file")
    return fd


def _open_text(path: Path, shown: str, errors: str, newline: str | None) -> IO[str]:
    return open(  # the caller's `with` closes it
        open_regular(path, shown), encoding="utf-8", errors=errors, newline=newline
    )


def _check_writable(info: os.stat_result, shown: str) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise ToolError(f"{shown} is not a regular file; it cannot be written")
    if info.st_nlink > 1:
        raise ToolError(
            f"{shown} has {info.st_nlink} hard links, so writing it would change the "
            "other links too (perhaps outside the working directory); remove it first "
            "(e.g. `rm` with run_command), then write it anew"
        )


def _write_text(path: Path, shown: str, content: str) -> None:
    """Write `content` exactly as given (newline="": no \\n -> \\r\\n translation).
    Opened without truncating and checked with fstat first, so a FIFO or a hard
    link swapped in after the caller's checks is refused with nothing written;
    O_NOFOLLOW refuses a symlink swapped in for the resolved path."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        raise ToolError(f"cannot write {shown}: {exc.strerror}") from exc
    try:
        _check_writable(os.fstat(fd), shown)
        os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    with open(fd, "w", encoding="utf-8", newline="") as f:
        f.write(content)


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [... {len(text) - limit} characters cut]"
