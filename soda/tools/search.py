"""search_text: a regular expression over the files list_files shows, answered
the way grep answers, because that is the form models know best.

A matching line is `path:N: text` and a context line `path-N- text`: one space
after the separator, then the line as it is in the file (indentation kept: it
is what edit_file's old text must match); with context, groups of lines are
separated by `--`. `files_only`
answers `path: N matching lines` per file instead, the cheap first look at
where something is used. Every answer is bounded (matches, files, characters
per line), and a cut answer says how to narrow it.
"""

from __future__ import annotations

import re
from pathlib import Path

from soda.tools.fileio import clip, matches, open_regular
from soda.tools.listing import tree_files
from soda.tools.sandbox import Sandbox, ToolError

MAX_MATCHES = 200
"""Matching lines shown without context, and files listed with files_only."""
MAX_CONTEXT = 10
"""Most context lines before and after a match; more is cut to this."""
MAX_CONTEXT_MATCHES = 50
"""Matches shown with context (each brings up to 2 * context lines along)."""
MAX_MATCH_CHARS = 300
MAX_SEARCH_BYTES = 5_000_000
"""Files larger than this are skipped by search_text (they are data, not code)."""

# Patterns whose match on one line might not be a match somewhere in the whole
# text (they look at string ends, behind, or assert an absence), so search_text
# cannot skip a file just because the whole text does not match.
_LINE_BOUND = ("$", "\\A", "\\Z", "\\z", "\\B", "(?<", "(?!", "(?-")


def search_text(
    sandbox: Sandbox,
    pattern: str,
    path: str | None,
    glob: str | None,
    context: int = 0,
    files_only: bool = False,
) -> str:
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ToolError(f"invalid regular expression {pattern!r}: {exc}") from exc
    if context < 0:
        raise ToolError("context must be 0 or more lines")
    context = min(context, MAX_CONTEXT)
    target = sandbox.resolve(path or ".")
    if not target.exists():
        raise ToolError(f"{path} does not exist")
    # Anything but a directory is searched as one file: a FIFO or device named as
    # the path is refused when opened, and counts as no match.
    base = target if target.is_dir() else target.parent
    files = tree_files(sandbox, target) if target.is_dir() else [target]
    whole = _whole_text_regex(pattern)
    limit = MAX_MATCHES if files_only or not context else MAX_CONTEXT_MATCHES
    shown: list[str] = []
    found, skipped = 0, 0  # matches (files with files_only) so far; files too big
    cut = False
    for file in files:
        if glob is not None and not matches(file.relative_to(base).as_posix(), glob):
            continue
        try:
            if file.stat().st_size > MAX_SEARCH_BYTES:
                skipped += 1
                continue
            lines = _lines(file, sandbox.relative(file), whole)
        except (OSError, ToolError):
            continue  # a dangling link, an unreadable or irregular file: nothing to search
        rel = sandbox.relative(file)
        hits = [i for i, line in enumerate(lines) if regex.search(line)]
        if not hits:
            continue
        if found == limit:
            cut = True
            break
        if files_only:
            shown.append(f"{rel}: {len(hits)} matching line{'s' if len(hits) > 1 else ''}")
            found += 1
            continue
        room = limit - found
        cut = len(hits) > room
        if context and shown:
            shown.append("--")
        shown.extend(_render(rel, lines, hits[:room], context))
        found += min(len(hits), room)
        if cut:
            break
    return _report(shown, cut, limit, skipped, files_only)


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


def _lines(file: Path, rel: str, whole: re.Pattern[str] | None) -> list[str]:
    """The lines of one file as a text file reads them (universal newlines, each
    line ending in its newline but the last); read in one go, and none at all for
    a binary file or when `whole` says nothing in it can match."""
    with open(open_regular(file, rel), "rb") as f:
        data = f.read()
    if b"\0" in data[:8192]:
        return []  # binary
    text = data.decode("utf-8", errors="replace")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if whole is not None and whole.search(text) is None:
        return []
    return text.splitlines(keepends=True)


def _render(rel: str, lines: list[str], hits: list[int], context: int) -> list[str]:
    """The matching lines (0-based indexes `hits`) of one file, each with up to
    `context` lines either side; groups that do not touch are separated by `--`."""
    out: list[str] = []
    hit_set = set(hits)
    last = -1  # the last index shown
    for hit in hits:
        start, end = max(hit - context, last + 1), min(hit + context, len(lines) - 1)
        if context and last >= 0 and start > last + 1:
            out.append("--")
        for i in range(start, end + 1):
            mark = ":" if i in hit_set else "-"
            text = clip(lines[i].rstrip("\n"), MAX_MATCH_CHARS)
            out.append(f"{rel}{mark}{i + 1}{mark} {text}")
        last = max(last, end)
    return out


def _report(shown: list[str], cut: bool, limit: int, skipped: int, files_only: bool) -> str:
    lines = shown or ["(no matches)"]
    if cut:
        what = "files" if files_only else "matches"
        hint = "" if files_only else " (files_only shows which files match)"
        lines.append(f"[stopped at {limit} {what}; narrow the pattern, path or glob{hint}]")
    if skipped:
        lines.append(f"[skipped {skipped} files over {MAX_SEARCH_BYTES:,} bytes]")
    return "\n".join(lines)
