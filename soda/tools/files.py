"""File tools inside a sandbox: read, list, search (read-only) and write, edit.

This module holds what the model is told about them (the specs) and reading
and listing; searching is `soda.tools.search`, writing and editing
`soda.tools.edits`, and how files are opened `soda.tools.fileio`. Every path
goes through `Sandbox.resolve`; every answer is capped so one call cannot
flood the model's context, and a cut answer says how to get the rest.

Listing and searching show the files git would: when the directory is inside a
git checkout, the files come from `git ls-files --cached --others
--exclude-standard` (tracked, plus untracked files `.gitignore` does not exclude),
so `node_modules`, build output and virtualenvs are never walked. Outside git,
or for a directory that is itself ignored (named on purpose), they come from a
walk of the tree. Either way each file still passes the sandbox's checks.

The descriptions follow Anthropic's guidance for tool definitions (what the
tool does, when to use it, what it returns, its limits; every parameter
described), and are sent with every request: they say each thing once.
"""

from __future__ import annotations

from soda.llm.base import ToolSpec
from soda.tools.edits import edit_file, write_file
from soda.tools.fileio import (
    existing_dir,
    existing_text_file,
    matches,
    numbered,
    open_regular,
    open_text,
)
from soda.tools.listing import tree_files
from soda.tools.sandbox import Sandbox, ToolError
from soda.tools.search import MAX_CONTEXT, MAX_MATCHES, MAX_SEARCH_BYTES, search_text
from soda.tools.toolbox import DIR_PATH, FILE_PATH, SCOPE_PATH, Tool, described, object_schema

__all__ = [
    "MAX_LIST_ENTRIES",
    "MAX_MATCHES",
    "MAX_READ_LINES",
    "edit_file",
    "list_files",
    "open_regular",
    "read_file",
    "reading_tools",
    "search_text",
    "write_file",
    "writing_tools",
]

MAX_READ_LINES = 2000
MAX_READ_CHARS = 100_000
MAX_LIST_ENTRIES = 500


def reading_tools(sandbox: Sandbox) -> list[Tool]:
    return [
        Tool(
            ToolSpec(
                "read_file",
                "Read a text file, each line shown as its number, a tab, then the line. "
                f"Reads up to {MAX_READ_LINES} lines from offset_line; a longer file ends with "
                "a note saying where to read on. Read a file before you edit it, so that "
                "edit_file's old text is copied exactly; the number and tab are not part of "
                "the file. Binary files and directories are refused.",
                object_schema(
                    {
                        "path": described("string", FILE_PATH),
                        "offset_line": described(
                            ["integer", "null"], "First line to read, from 1; null means 1."
                        ),
                        "max_lines": described(
                            ["integer", "null"],
                            f"Most lines to read; null means as many as fit ({MAX_READ_LINES}).",
                        ),
                    }
                ),
            ),
            lambda a: read_file(sandbox, a["path"], a["offset_line"], a["max_lines"]),
        ),
        Tool(
            ToolSpec(
                "list_files",
                "List files under a directory, recursively, one path per line relative to "
                "the repository root. It lists what git would (tracked files and untracked "
                "ones .gitignore does not exclude), so .venv, node_modules and build output "
                "are left out unless named as path. Use it to find files by name; repo_map "
                "gives an overview with signatures, and search_text finds contents. At most "
                f"{MAX_LIST_ENTRIES} paths are listed; a last line says how many more there are.",
                object_schema(
                    {
                        "path": described(["string", "null"], DIR_PATH),
                        "pattern": described(
                            ["string", "null"],
                            "Glob, null for every file: without '/' it matches file names "
                            "('*.py'), with '/' paths below path ('src/**/*.py').",
                        ),
                    }
                ),
            ),
            lambda a: list_files(sandbox, a["path"], a["pattern"]),
        ),
        Tool(
            ToolSpec(
                "search_text",
                "Search file contents with a Python regular expression, line by line, in the "
                "files list_files shows. Answers like grep -n: 'path:N: text' for a matching "
                "line and 'path-N- text' for a context line (after the space, the line with "
                "its indentation), '--' between groups. With files_only it lists just the "
                "matching files with their counts, the cheap first look at where something is "
                "used. Binary files and files "
                f"over {MAX_SEARCH_BYTES // 1_000_000} MB are skipped, and it stops after "
                f"{MAX_MATCHES} matches (fewer with context): narrow path or glob for more.",
                object_schema(
                    {
                        "pattern": described(
                            "string",
                            "Python regular expression, e.g. 'def \\w+\\('; escape ( [ . * to "
                            "match them literally.",
                        ),
                        "path": described(["string", "null"], SCOPE_PATH),
                        "glob": described(
                            ["string", "null"],
                            "File filter like list_files' pattern, e.g. '*.py'; null for all.",
                        ),
                        "context": described(
                            "integer",
                            f"Lines shown before and after each match, 0 to {MAX_CONTEXT}; "
                            "0 for none.",
                        ),
                        "files_only": described(
                            "boolean",
                            "true: list only the matching files, each with its number of "
                            "matching lines; false: show the matching lines.",
                        ),
                    }
                ),
            ),
            lambda a: search_text(
                sandbox, a["pattern"], a["path"], a["glob"], a["context"], a["files_only"]
            ),
            defaults={"context": 0, "files_only": False},
        ),
    ]


def writing_tools(sandbox: Sandbox) -> list[Tool]:
    return [
        Tool(
            ToolSpec(
                "write_file",
                "Create a file, or replace all of one, with exactly the given content; "
                "missing parent directories are created. Use it for new files and for "
                "rewriting small ones; to change part of a file use edit_file, which leaves "
                "the rest alone. The content is written as given (UTF-8, its own line "
                "endings), and the answer says whether the file was created or overwritten.",
                object_schema(
                    {
                        "path": described("string", FILE_PATH),
                        "content": described("string", "The complete new content of the file."),
                    }
                ),
            ),
            lambda a: write_file(sandbox, a["path"], a["content"]),
        ),
        Tool(
            ToolSpec(
                "edit_file",
                "Replace exact text in a file: old must match the file character for "
                "character, indentation included, and occur once (add surrounding lines to "
                "make it unique) unless replace_all is true. Never include read_file's "
                "line-number prefix (the number and tab) in old or new. On success the "
                "answer shows the edited lines with a few around them, numbered. On failure "
                "it shows the closest lines of the file: copy old from them and try again.",
                object_schema(
                    {
                        "path": described("string", FILE_PATH),
                        "old": described(
                            "string", "The exact text to replace, copied from the file; not empty."
                        ),
                        "new": described("string", "The text to put in its place ('' deletes)."),
                        "replace_all": described(
                            "boolean",
                            "true: replace every occurrence of old (the answer says how many); "
                            "false: old must occur exactly once.",
                        ),
                    }
                ),
            ),
            lambda a: edit_file(sandbox, a["path"], a["old"], a["new"], a["replace_all"]),
            defaults={"replace_all": False},
        ),
    ]


def read_file(sandbox: Sandbox, path: str, offset_line: int | None, max_lines: int | None) -> str:
    target = existing_text_file(sandbox, path)
    first = 1 if offset_line is None else offset_line
    wanted = MAX_READ_LINES if max_lines is None else min(max_lines, MAX_READ_LINES)
    if first < 1 or wanted < 1:
        raise ToolError("offset_line and max_lines must be at least 1")
    shown: list[str] = []
    chars, total = 0, 0
    with open_text(target, path, errors="replace", newline="") as f:
        for total, line in enumerate(f, start=1):
            if total < first or len(shown) >= wanted or chars >= MAX_READ_CHARS:
                continue  # keep counting: the note says how long the file is
            text = numbered(total, line.rstrip("\r\n"))
            shown.append(text)
            chars += len(text) + 1
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
    start = existing_dir(sandbox, path)
    found = sorted(
        sandbox.relative(file)
        for file in tree_files(sandbox, start)
        if pattern is None or matches(file.relative_to(start).as_posix(), pattern)
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
