"""Read-only git tools for agents: log, show, diff, run as `git` subprocesses.

They go through `soda.proc.run` (the orchestrator's own git work goes through
`soda.repo.git`). Revisions come from the model and are passed as single arguments
after `--end-of-options`; ones starting with `-` are refused outright so that no
revision can be read as an option. Paths go through the sandbox and after `--`.
"""

from __future__ import annotations

from pathlib import Path

from soda.llm.base import ToolSpec
from soda.system.proc import run
from soda.tools.sandbox import Sandbox, ToolError
from soda.tools.toolbox import Tool, object_schema

DEFAULT_LOG_COUNT = 20
MAX_LOG_COUNT = 200
GIT_TIMEOUT_S = 60.0
# Never page, never colour, no pathspec magic; GIT_OPTIONAL_LOCKS=0 stops `git diff` from refreshing
# the index, which would take index.lock under a running orchestrator.
GIT = ["git", "--no-pager", "--literal-pathspecs", "-c", "color.ui=never"]
NO_PROGRAMS = ["--no-ext-diff", "--no-textconv"]
"""For show and diff: never run a diff program a repository configured."""
GIT_ENV = {"GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0"}

NULLABLE_STRING = {"type": ["string", "null"]}


def git_tools(sandbox: Sandbox, repo_dir: Path, output_limit: int) -> list[Tool]:
    git = _Git(sandbox, repo_dir, output_limit)
    return [
        Tool(
            ToolSpec(
                "git_log",
                "Recent commits, newest first: hash, date, author, subject. max_count null "
                f"means {DEFAULT_LOG_COUNT} (at most {MAX_LOG_COUNT}); path limits the log "
                "to commits touching it.",
                object_schema(
                    {"max_count": {"type": ["integer", "null"]}, "path": NULLABLE_STRING}
                ),
            ),
            lambda a: git.log(a["max_count"], a["path"]),
        ),
        Tool(
            ToolSpec(
                "git_show",
                "Show a commit (message, stat and patch), or a file at a revision with 'REV:path'.",
                object_schema({"rev": {"type": "string"}}),
            ),
            lambda a: git.show(a["rev"]),
        ),
        Tool(
            ToolSpec(
                "git_diff",
                "A diff. rev_range null means uncommitted changes against HEAD; otherwise a "
                "revision ('main') or range ('main..HEAD'). path limits it to one file or "
                "directory.",
                object_schema({"rev_range": NULLABLE_STRING, "path": NULLABLE_STRING}),
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
        return (
            self._git(["diff", *NO_PROGRAMS, "--end-of-options", rev], path) or "(no differences)"
        )

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


def _rev(rev: str) -> str:
    rev = rev.strip()
    if not rev:
        raise ToolError("revision is empty")
    if rev.startswith("-"):
        raise ToolError(f"{rev!r} looks like an option; give a revision such as HEAD~1")
    return rev
