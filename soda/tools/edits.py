"""write_file and edit_file, and what an edit answers.

A model edits blind unless the answer shows it what happened, so:

- a successful edit shows the edited region with a few lines either side,
  numbered as read_file numbers them (the first regions only, when
  `replace_all` changed many);
- a failed edit (old text not found, or found more than once without
  `replace_all`) shows the lines of the file closest to the old text, numbered,
  plus a hint when the cause is a common one: read_file's line-number prefix
  copied into the old text, or a difference only in whitespace. The closest
  lines are found the way aider's `find_similar_lines` does, with `difflib`:
  a window as long as the old text, placed where most of its lines match
  exactly (ignoring surrounding whitespace), else where single lines come
  closest. Both answers are bounded.
"""

from __future__ import annotations

import difflib
import heapq
import re
from collections import defaultdict

from soda.tools.fileio import (
    check_writable,
    existing_text_file,
    numbered,
    open_text,
    write_text,
)
from soda.tools.sandbox import Sandbox, ToolError

CONTEXT_LINES = 3
"""Unchanged lines shown before and after an edited region."""
MAX_SHOWN_LINES = 60
"""Lines of the file one edit answer shows, over all its regions."""
MAX_SHOWN_REGIONS = 3
"""Edited regions shown after a replace_all; the others are only counted."""
SIMILAR_MARGIN = 2
"""Lines shown around the closest window on a failed edit."""
MAX_SIMILAR_LINES = 30
SIMILAR_CUTOFF = 0.6
"""How alike (difflib ratio) a line must be to count as close."""
MAX_FUZZY_PROBES = 3
"""Lines of the old text compared by similarity, when none matches exactly."""
MAX_FUZZY_RATIOS = 6000
"""Full difflib comparisons one failed edit may make (each some tens of µs)."""

_PREFIX = re.compile(r"^ *\d+\t")
"""read_file's line-number prefix, as a model might copy it into old text."""


def write_file(sandbox: Sandbox, path: str, content: str) -> str:
    target = sandbox.resolve(path)
    if target.is_dir():
        raise ToolError(f"{path} is a directory")
    existed = target.exists()
    if existed:
        check_writable(target.stat(), path)  # refuse before opening anything
    target.parent.mkdir(parents=True, exist_ok=True)
    write_text(target, path, content)
    verb = "overwrote" if existed else "created"
    return f"{verb} {sandbox.relative(target)} ({len(content)} characters)"


def edit_file(sandbox: Sandbox, path: str, old: str, new: str, replace_all: bool = False) -> str:
    if not old:
        raise ToolError("old must not be empty; use write_file to create a file")
    target = existing_text_file(sandbox, path)
    check_writable(target.stat(), path)
    try:
        with open_text(target, path, errors="strict", newline="") as f:
            text = f.read()
    except UnicodeDecodeError as exc:
        raise ToolError(f"{path} is not UTF-8 text; edit_file cannot change it safely") from exc
    count = text.count(old)
    if count == 0:
        raise ToolError(*_not_found(path, text, old))
    if count > 1 and not replace_all:
        raise ToolError(
            f"old text occurs {count} times in {path}; include more surrounding lines "
            "so that it occurs exactly once, or set replace_all to replace all of them",
            _occurrences(text, old),
        )
    edited = text.replace(old, new)
    write_text(target, path, edited)
    rel = sandbox.relative(target)
    noun = "occurrence" if count == 1 else "occurrences"
    return f"edited {rel}: replaced {count} {noun}\n{_edited_regions(text, edited, old, new)}"


def _edited_regions(before: str, after: str, old: str, new: str) -> str:
    """The new text's lines around each replacement, numbered (bounded)."""
    lines = _split(after)
    spans: list[tuple[int, int]] = []  # 0-based first and last line of each replacement
    shift, start = 0, before.find(old)
    while start >= 0:
        at = start + shift
        first = after.count("\n", 0, at)
        last = first + max(new.count("\n") - new.endswith("\n"), 0)
        spans.append((first, last))
        shift += len(new) - len(old)
        start = before.find(old, start + len(old))
    regions: list[tuple[int, int]] = []
    for first, last in spans:
        low = max(first - CONTEXT_LINES, 0)
        high = min(last + CONTEXT_LINES, len(lines) - 1)
        if regions and low <= regions[-1][1] + 1:
            regions[-1] = (regions[-1][0], max(high, regions[-1][1]))
        else:
            regions.append((low, high))
    out: list[str] = []
    for low, high in regions[:MAX_SHOWN_REGIONS]:
        if out:
            out.append("--")
        room = MAX_SHOWN_LINES - len(out)
        if room <= 1:
            break
        out.extend(numbered(i + 1, lines[i]) for i in range(low, min(high + 1, low + room)))
        if high + 1 > low + room:
            out.append(f"[... lines {low + room + 1}-{high + 1} not shown; read_file them]")
    if len(regions) > MAX_SHOWN_REGIONS:
        out.append(f"[{len(regions) - MAX_SHOWN_REGIONS} more edited regions not shown]")
    return "\n".join(out) if out else "(the file is now empty)"


def _not_found(path: str, text: str, old: str) -> tuple[str, str]:
    """The message for old text that does not occur, and the closest lines."""
    old_lines = old.splitlines()
    hint = ""
    content = [line for line in old_lines if line.strip()]
    if content and all(_PREFIX.match(line) for line in content):
        hint = (
            " It looks like old includes read_file's line-number prefixes (the number "
            "and tab): leave them out."
        )
        old_lines = [_PREFIX.sub("", line, count=1) for line in old_lines]
    lines = _split(text)
    window = _closest_window(lines, old_lines)
    if window is None:
        return (
            f"old text not found in {path}, and no lines of it are alike; read the file "
            f"and copy the text exactly.{hint}",
            "",
        )
    first, last = window
    same = [line.strip() for line in lines[first : last + 1]] == [
        line.strip() for line in old_lines
    ]
    if same and not hint:
        hint = (
            " The closest lines differ only in whitespace (indentation, trailing "
            "spaces, tabs or line endings): copy them exactly."
        )
    low = max(first - SIMILAR_MARGIN, 0)
    high = min(last + SIMILAR_MARGIN, len(lines) - 1, low + MAX_SIMILAR_LINES - 1)
    shown = [numbered(i + 1, lines[i]) for i in range(low, high + 1)]
    return (
        f"old text not found in {path}.{hint} The closest lines of the file are below "
        "(the number and tab before each line are not part of the file); copy old from "
        "them exactly and try again.",
        "\n".join(shown),
    )


def _closest_window(lines: list[str], old_lines: list[str]) -> tuple[int, int] | None:
    """The 0-based first and last line of the part of the file most like
    `old_lines`: where most of its lines match exactly once stripped (then once
    all whitespace is gone), else where single lines come closest by difflib's
    ratio. None when nothing is alike."""
    votes: dict[int, float] = {}  # where the window would start: its weight
    for key in (str.strip, _squeezed):
        votes = _exact_votes([key(line) for line in lines], [key(line) for line in old_lines])
        if votes:
            break
    else:
        votes = _fuzzy_votes([line.strip() for line in lines], old_lines)
    if not votes:
        return None
    start = max(votes.items(), key=lambda item: (item[1], -item[0]))[0]
    first = min(max(start, 0), max(len(lines) - 1, 0))
    return first, min(first + max(len(old_lines), 1) - 1, len(lines) - 1)


def _squeezed(line: str) -> str:
    return "".join(line.split())


def _where(lines: list[str]) -> dict[str, list[int]]:
    where: dict[str, list[int]] = {}
    for i, line in enumerate(lines):
        if line:
            where.setdefault(line, []).append(i)
    return where


def _exact_votes(lines: list[str], old_lines: list[str]) -> dict[int, float]:
    """For each line of the old text found in the file, a vote for the window
    that would put it there (cheap: one dictionary lookup a line)."""
    where = _where(lines)
    votes: defaultdict[int, float] = defaultdict(float)
    for j, line in enumerate(old_lines):
        for i in where.get(line, []) if line else []:
            votes[i - j] += 1
    return votes


def _fuzzy_votes(lines: list[str], old_lines: list[str]) -> dict[int, float]:
    """Votes from the first few lines of the old text for the windows that put
    them at the file's most similar lines, weighted by how similar: near-twins
    (`value_200` and `value_2000`) are told apart by the weight. difflib's
    cheap bounds come first, and at most MAX_FUZZY_RATIOS full comparisons are
    made, so a huge file of look-alike lines costs a bounded time."""
    where = _where(lines)
    votes: defaultdict[int, float] = defaultdict(float)
    matcher = difflib.SequenceMatcher()
    budget = MAX_FUZZY_RATIOS
    probes = [(j, line.strip()) for j, line in enumerate(old_lines) if line.strip()]
    for j, probe in probes[:MAX_FUZZY_PROBES]:
        matcher.set_seq2(probe)
        scored: list[tuple[float, str]] = []
        for candidate in where:
            matcher.set_seq1(candidate)
            if matcher.real_quick_ratio() < SIMILAR_CUTOFF:
                continue
            if matcher.quick_ratio() < SIMILAR_CUTOFF or budget <= 0:
                continue
            budget -= 1
            score = matcher.ratio()
            if score >= SIMILAR_CUTOFF:
                scored.append((score, candidate))
        for score, close in heapq.nlargest(3, scored):
            for i in where[close]:
                votes[i - j] += score
    return votes


def _occurrences(text: str, old: str) -> str:
    """Where old occurs: the lines of its first few occurrences, numbered."""
    lines = _split(text)
    out: list[str] = []
    start, regions, last = text.find(old), 0, -1
    while start >= 0:
        first = text.count("\n", 0, start)
        end = first + max(old.count("\n") - old.endswith("\n"), 0)
        if first > last:  # a second occurrence on lines already shown adds nothing
            regions += 1
            if regions <= MAX_SHOWN_REGIONS:
                if out:
                    out.append("--")
                high = min(end, first + MAX_SIMILAR_LINES // MAX_SHOWN_REGIONS - 1)
                out.extend(numbered(i + 1, lines[i]) for i in range(first, high + 1))
            last = end
        start = text.find(old, start + len(old))
    if regions > MAX_SHOWN_REGIONS:
        out.append(f"[{regions - MAX_SHOWN_REGIONS} more not shown]")
    return "\n".join(out)


def _split(text: str) -> list[str]:
    """The lines of `text` as read_file numbers them (a final newline ends the
    last line; it does not start another), without their line endings."""
    lines = text.split("\n")
    if lines and lines[-1] == "" and text:
        lines.pop()
    return [line.removesuffix("\r") for line in lines]
