"""Whether a task's work tree is still a clean checkout after the executor's run.

A work tree goes back to the pool after each attempt; the next `Checkouts.work`
runs `git clean -ffdx` over it unless the pool is told the tree is clean. It is
clean when the executor ran nothing there and everything it wrote was
committed: `Watched` wraps the executor's tools and notes each call. A call to
a tool of the read-only set is harmless; a write through the file tools is
harmless if what it wrote is tracked in the commit; anything else (a command, a
tool it does not know, a write it cannot account for) means the tree must be
cleaned. When in doubt, it says "clean it".
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path
from typing import Any

from git import Repo

from soda.agent.runtime import Toolset
from soda.llm.base import ToolSpec
from soda.repo import objects
from soda.repo.refs import tree_of
from soda.repo.workspace import Changes, Workspace
from soda.tools import read_only_tools
from soda.tools.files import writing_tools
from soda.tools.sandbox import Sandbox, ToolError

REGULAR_FILES = (0o100644, 0o100755)


@functools.cache
def _names() -> tuple[frozenset[str], frozenset[str]]:
    """The names of the read-only tools and of the file-writing tools (the same
    for every sandbox)."""
    sandbox = Sandbox(Path(tempfile.gettempdir()))
    harmless = frozenset(read_only_tools(sandbox).tools)
    return harmless, frozenset(tool.spec.name for tool in writing_tools(sandbox))


class Watched:
    """The executor's tools, noting what each call could have left in the tree."""

    def __init__(self, tools: Toolset, sandbox: Sandbox) -> None:
        self.tools = tools
        self.sandbox = sandbox
        self.harmless, self.writers = _names()
        self.written: list[str] = []
        self.unsure = False
        """A call that may have left something besides committed files."""

    def specs(self) -> list[ToolSpec]:
        return self.tools.specs()

    @property
    def root(self) -> Path | None:
        """The worktree (where the executor's MCP servers run)."""
        return self.sandbox.root

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        if name in self.writers and isinstance(arguments.get("path"), str):
            self.written.append(arguments["path"])
        elif name not in self.harmless:
            self.unsure = True
        return self.tools.call(name, arguments)

    def clean(self, repo: Repo, ws: Workspace) -> bool:
        """Whether the tree is a clean checkout of `ws`'s head (call it after the
        commit): nothing ran, and every file written is a tracked regular file."""
        if self.unsure:
            return False
        try:
            tree = tree_of(repo, ws.head())
            for path in self.written:
                real = self.sandbox.resolve(path)
                entry = objects.entry_at(repo, tree, self.sandbox.relative(real))
                if entry is None or entry[0] not in REGULAR_FILES:
                    return False
        except (ToolError, objects.Undecided, OSError, ValueError):
            return False
        return True

    def changes(self) -> Changes | None:
        """What the run changed in the tree, when that is known: nothing ran, so
        the files written are all that changed (the file tools never delete).
        None when something else may have changed. soda.repo.workspace's
        `commit_all` then stages just these files instead of scanning the tree."""
        if self.unsure:
            return None
        try:
            real = [self.sandbox.resolve(path) for path in self.written]
            return Changes(list(dict.fromkeys(self.sandbox.relative(path) for path in real)))
        except (ToolError, OSError, ValueError):
            return None
