"""Read-only git tools for agents: log, show, diff, run as `git` subprocesses.

`git_diff` without a revision also shows untracked files (those .gitignore does
not exclude) as additions, so a test file the executor just wrote is in its
review of its own work; git never writes the index for it.

They go through `soda.proc.run` (the orchestrator's own git work goes through
`soda.repo.git`). Revisions come from the model and are passed as single arguments
after `--end-of-options`; ones starting with `-` are refused outright so that no
revision can be read as an option. Paths go through the sandbox and after `--`.
"""

from __future__ import annotations

import os
from pathlib import Path

from soda.llm.base import ToolSpec
from soda.system.proc import run
from soda.tools.fileio import open_regular
from soda.tools.listing import vetted
from soda.tools.sandbox import Sandbox, ToolError
from soda.tools.search import MAX_SEARCH_BYTES
from soda.tools.toolbox import SCOPE_PATH, Tool, described, object_schema

DEFAULT_LOG_COUNT = 20
MAX_LOG_COUNT = 200
GIT_TIMEOUT_S = 60.0
# Never page, never colour, no pathspec magic; GIT_OPTIONAL_LOCKS=0 stops `git diff` from refreshing
# the index, which would take index.lock under a running orchestrator.
GIT = ["git", "--no-pager", "--literal-pathspecs", "-c", "color.ui=never"]
NO_PROGRAMS = ["--no-ext-diff", "--no-textconv"]
"""For show and diff: never run a diff program a repository configured."""
GIT_ENV = {"GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0"}

MAX_NEW_FILES = 20
"""Untracked files git_diff shows in full; the others are named."""
MAX_NEW_FILE_LINES = 200
"""Lines of one untracked file git_diff shows."""


def git_tools(sandbox: Sandbox, repo_dir: Path, output_limit: int) -> list[Tool]:
    git = _Git(sandbox, repo_dir, output_limit)
    return [
        Tool(
            ToolSpec(
                "git_log",
                "List commits, newest first, one a line: short hash, date, author and "
                "subject. Use it to see what changed lately and why; git_show with a hash "
                "shows one in full. It lists the history of the current HEAD only.",
                object_schema(
                    {
                        "max_count": described(
                            ["integer", "null"],
                            f"Commits to list, 1 to {MAX_LOG_COUNT}; null means "
                            f"{DEFAULT_LOG_COUNT}.",
                        ),
                        "path": described(
                            ["string", "null"],
                            "Only commits that touched this file or directory (relative to "
                            "the repository root); null for all.",
                        ),
                    }
                ),
            ),
            lambda a: git.log(a["max_count"], a["path"]),
        ),
        Tool(
            ToolSpec(
                "git_show",
                "Show a commit (message, files changed, patch), or with 'REV:path' a whole "
                "file as it is at that revision. Use 'HEAD:path' to see the last committed "
                "version of a file you changed, and a hash from git_log to see why code is "
                "as it is. A very long answer is cut in the middle.",
                object_schema(
                    {
                        "rev": described(
                            "string",
                            "A commit ('HEAD', 'HEAD~2', a hash, a branch), or 'REV:path' with "
                            "the path relative to the repository root.",
                        )
                    }
                ),
            ),
            lambda a: git.show(a["rev"]),
        ),
        Tool(
            ToolSpec(
                "git_diff",
                "Show a unified diff. With rev_range null it is your uncommitted work "
                "against HEAD, new untracked files included (as additions): use it to review "
                "your changes before you submit. With a revision it compares that revision "
                "with the working tree, with a range ('main..HEAD') two commits. Files "
                ".gitignore excludes never appear.",
                object_schema(
                    {
                        "rev_range": described(
                            ["string", "null"],
                            "null for uncommitted changes; a revision ('HEAD~1') or a range "
                            "('main..HEAD').",
                        ),
                        "path": described(["string", "null"], SCOPE_PATH),
                    }
                ),
            ),
            lambda a: git.diff(a["rev_range"], a["path"]),
        ),
    ]


class _Git:
    def __init__(self, sandbox: Sandbox, repo_dir: Path, output_limit: int) -> None:
        self.sandbox = sandbox
        self.repo_dir = repo_dir
        self.output_limit = output_limit

    def log(self, max_count: int | None, path: str | None) -> str:
        count = DEFAULT_LOG_COUNT if max_count is None else max_count
        if not 1 <= count <= MAX_LOG_COUNT:
            raise ToolError(f"max_count must be between 1 and {MAX_LOG_COUNT}")
        args = ["log", f"--max-count={count}", "--date=short", "--format=%h %ad %an: %s"]
        return self._git(args, path) or "(no commits)"

    def show(self, rev: str) -> str:
        return self._git(
            ["show", *NO_PROGRAMS, "--stat", "--patch", "--end-of-options", _rev(rev)], None
        )

    def diff(self, rev_range: str | None, path: str | None) -> str:
        rev = "HEAD" if rev_range is None else _rev(rev_range)
        shown = self._git(["diff", *NO_PROGRAMS, "--end-of-options", rev], path)
        if rev_range is None:
            shown = "\n".join(part for part in (shown, self._untracked(path)) if part)
        return shown or "(no differences)"

    def _untracked(self, path: str | None) -> str:
        """Untracked files (those .gitignore does not exclude) as additions, the
        way `git diff` shows a new file. Rendered here rather than with `git add
        -N`, which writes the index (read-only in the jail, and the orchestrator's
        own), and read through the sandbox's checks like any file a tool opens."""
        listed = self._git(["ls-files", "-z", "--others", "--exclude-standard"], path)
        repo, root = self.repo_dir.resolve(), self.sandbox.root
        by_root = {  # the sandbox vets paths from its root; git names them from the repository
            (repo / rel).relative_to(root).as_posix(): rel
            for rel in set(listed.split("\0")) - {""}
            if (repo / rel).is_relative_to(root)
        }
        shown = [by_root[rel] for rel in vetted(self.sandbox, root, sorted(by_root))]
        parts = [new_file_patch(self.repo_dir / rel, rel) for rel in shown[:MAX_NEW_FILES]]
        if len(shown) > MAX_NEW_FILES:
            rest = shown[MAX_NEW_FILES:]
            parts.append(f"[{len(rest)} more new files not shown: {', '.join(rest)}]")
        return "\n".join(parts)

    def _git(self, args: list[str], path: str | None) -> str:
        paths = [] if path is None else ["--", self._pathspec(path)]
        result = run(
            [*GIT, *args, *paths],
            cwd=self.repo_dir,
            timeout=GIT_TIMEOUT_S,
            output_limit=self.output_limit,
            extra_env=GIT_ENV,
        )
        if not result.ok:
            first = result.output.strip().splitlines()[:1] or ["no output"]
            raise ToolError(f"git {args[0]} failed: {first[0]}")
        return result.output.strip()

    def _pathspec(self, path: str) -> str:
        # Git paths are relative to the repository, which may differ from the root.
        target = self.sandbox.resolve(path)
        repo = self.repo_dir.resolve()
        if not target.is_relative_to(repo):
            raise ToolError(f"{path!r} is outside the git repository")
        return target.relative_to(repo).as_posix()


def new_file_patch(file: Path, rel: str) -> str:
    """An untracked file as `git diff` shows an added one, bounded: the first
    MAX_NEW_FILE_LINES lines; a binary or huge file only named."""
    head = f"diff --git a/{rel} b/{rel}\nnew file mode {_mode(file)}\n"
    try:
        with open(open_regular(file, rel), "rb") as f:
            data = f.read(MAX_SEARCH_BYTES + 1)
    except (OSError, ToolError) as exc:
        return f"{head}[cannot read it: {exc}]"
    if not data:
        return head.rstrip("\n")
    if b"\0" in data[:8192]:
        return f"{head}Binary files /dev/null and b/{rel} differ"
    if len(data) > MAX_SEARCH_BYTES:
        return f"{head}[over {MAX_SEARCH_BYTES:,} bytes: not shown; read_file {rel} in parts]"
    lines = data.decode("utf-8", errors="replace").splitlines()
    body = [f"+{line}" for line in lines[:MAX_NEW_FILE_LINES]]
    if len(lines) > MAX_NEW_FILE_LINES:
        body.append(f"[... {len(lines) - MAX_NEW_FILE_LINES} more lines; read_file {rel}]")
    elif not data.endswith((b"\n", b"\r")):
        body.append("\\ No newline at end of file")
    hunk = f"@@ -0,0 +1{f',{len(lines)}' if len(lines) != 1 else ''} @@"
    return "\n".join([f"{head}--- /dev/null\n+++ b/{rel}\n{hunk}", *body])


def _mode(file: Path) -> str:
    try:
        return "100755" if os.stat(file).st_mode & 0o111 else "100644"
    except OSError:
        return "100644"


def _rev(rev: str) -> str:
    rev = rev.strip()
    if not rev:
        raise ToolError("revision is empty")
    if rev.startswith("-"):
        raise ToolError(f"{rev!r} looks like an option; give a revision such as HEAD~1")
    return rev
