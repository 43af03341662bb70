"""What agents may do: read, list and search files, see a map of the repository,
read git history, run the tests on the milestone tip (ORIENT), and (in a
worktree) write, edit, run commands and run the tests there, all confined to
one directory.

Two toolboxes are built here: `read_only_tools` for ORIENT's agents and
`worktree_tools` for the executor. The terminal tools (submit, cannot_complete)
belong to the runtime, not here; so does the choice of the MCP servers an agent
run is given (`servers.py`: `[mcp.servers]`, started in the jail, their tools
offered beside these, in the toolbox's `root`).

May import: config, errors, gate, llm, repo, system.
"""

from __future__ import annotations

from pathlib import Path

from soda.config import DEFAULT_REPO_MAP_TOKENS, Config
from soda.system.jail import Jail
from soda.tools.commands import command_tools
from soda.tools.files import reading_tools, writing_tools
from soda.tools.git import git_tools
from soda.tools.repomap import repo_map_tools
from soda.tools.sandbox import Sandbox, ToolError
from soda.tools.tests import TestRun, test_tools, worktree_test_tools
from soda.tools.toolbox import Tool, Toolbox, ToolOutcome, object_schema

DEFAULT_OUTPUT_LIMIT = 20_000

__all__ = [
    "Sandbox",
    "Tool",
    "ToolError",
    "ToolOutcome",
    "Toolbox",
    "object_schema",
    "read_only_tools",
    "worktree_tools",
]


def read_only_tools(
    sandbox: Sandbox,
    repo_dir: Path | None = None,
    output_limit: int = DEFAULT_OUTPUT_LIMIT,
    repo_map_tokens: int = DEFAULT_REPO_MAP_TOKENS,
    tests: tuple[TestRun, str] | None = None,
) -> Toolbox:
    """read_file, list_files, search_text, repo_map, git_log, git_show, git_diff,
    and run_tests when `tests` (how to run them, and the commit they run on) is
    given. Git runs in `repo_dir` (default: the sandbox root); the repository map
    is about `repo_map_tokens` long (`[context] repo_map_tokens`)."""
    repo = sandbox.root if repo_dir is None else Path(repo_dir)
    return Toolbox(
        [
            *reading_tools(sandbox),
            *repo_map_tools(sandbox, repo_map_tokens),
            *git_tools(sandbox, repo, output_limit),
            *(test_tools(*tests) if tests else []),
        ],
        root=sandbox.root,
    )


def worktree_tools(
    sandbox: Sandbox,
    command_timeout: float,
    output_limit: int,
    jail: Jail | None = None,
    repo_map_tokens: int = DEFAULT_REPO_MAP_TOKENS,
    config: Config | None = None,
) -> Toolbox:
    """Everything in read_only_tools plus write_file, edit_file and run_command,
    and with `config` run_tests (its `[project] test_command` in the worktree).
    Commands run in `jail` (default: a bubblewrap jail with the sandbox root as
    the repository)."""
    jail = jail or Jail(mode="bwrap", repo_root=sandbox.root, git_dir=sandbox.root / ".git")
    return read_only_tools(
        sandbox, output_limit=output_limit, repo_map_tokens=repo_map_tokens
    ).extended(
        [
            *writing_tools(sandbox),
            *command_tools(sandbox, jail, command_timeout, output_limit),
            *(worktree_test_tools(config, jail, sandbox) if config else []),
        ]
    )
