"""How the file tools open, check and write files, shared by reading, searching
and editing.

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
import stat
from pathlib import Path
from typing import IO

from soda.tools.sandbox import Sandbox, ToolError

MAX_LINE_CHARS = 4000
"""Characters of one line shown by read_file (and in an edit's answer)."""

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def numbered(number: int, text: str) -> str:
    """One line as read_file shows it: the number right-aligned, a tab, the text.
    Every tool that shows lines of a file by number uses this one form."""
    return f"{number:>6}\t{clip(text, MAX_LINE_CHARS)}"


def existing_text_file(sandbox: Sandbox, path: str) -> Path:
    target = sandbox.resolve(path)
    if target.is_dir():
        raise ToolError(f"{path} is a directory; use list_files")
    if not target.exists():
        raise ToolError(f"{path} does not exist")
    if not target.is_file():
        raise ToolError(f"{path} is not a regular file")
    if is_binary(target, path):
        raise ToolError(f"{path} is a binary file")
    return target


def existing_dir(sandbox: Sandbox, path: str | None) -> Path:
    target = sandbox.resolve(path or ".")
    if not target.is_dir():
        raise ToolError(f"{path} is not a directory")
    return target


def matches(rel: str, pattern: str) -> bool:
    """Whether the path `rel` matches a list_files pattern or search_text glob:
    without '/' the pattern is about the file name, with '/' about the path."""
    if "/" not in pattern:
        return fnmatch.fnmatch(rel.rsplit("/", 1)[-1], pattern)
    if fnmatch.fnmatch(rel, pattern):
        return True
    # '**/x' should also match x at the top, as in a shell with globstar.
    return pattern.startswith("**/") and matches(rel, pattern[3:])


def is_binary(path: Path, shown: str) -> bool:
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


def open_text(path: Path, shown: str, errors: str, newline: str | None) -> IO[str]:
    return open(  # the caller's `with` closes it
        open_regular(path, shown), encoding="utf-8", errors=errors, newline=newline
    )


def check_writable(info: os.stat_result, shown: str) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise ToolError(f"{shown} is not a regular file; it cannot be written")
    if info.st_nlink > 1:
        raise ToolError(
            f"{shown} has {info.st_nlink} hard links, so writing it would change the "
            "other links too (perhaps outside the working directory); remove it first "
            "(e.g. `rm` with run_command), then write it anew"
        )


def write_text(path: Path, shown: str, content: str) -> None:
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
        check_writable(os.fstat(fd), shown)
        os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    with open(fd, "w", encoding="utf-8", newline="") as f:
        f.write(content)


def clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [... {len(text) - limit} characters cut]"
