"""soda.tools: the sandbox, the toolbox and every tool, on real files and real git repos."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from soda.llm.base import ToolSpec
from soda.system.jail import Jail
from soda.tools import Sandbox, Tool, Toolbox, ToolError, read_only_tools, worktree_tools
from soda.tools.files import MAX_LIST_ENTRIES, MAX_MATCHES, MAX_READ_LINES
from tests.conftest import git
from tests.test_proc import live_processes_with, sleep_token

SECRET = "outside-secret-4711"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A git repository with one commit, a state dir inside it, and a secret outside."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "app.py").write_text("def main():\n    return 1\n")
    (repo / "README.md").write_text("# demo\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "first commit")
    (repo / "state").mkdir()
    (repo / "state" / "soda.db").write_text(SECRET)
    return repo


@pytest.fixture
def box(root: Path) -> Toolbox:
    return worktree_tools(sandbox(root), command_timeout=5, output_limit=2000)


def sandbox(root: Path) -> Sandbox:
    return Sandbox(root, extra_deny=[root / "state"])


def call(box: Toolbox, name: str, **arguments: Any) -> str:
    """Call a tool that must succeed; fill omitted nullable arguments with None."""
    outcome = box.call(name, with_nulls(box, name, arguments))
    assert not outcome.is_error, outcome.content
    return outcome.content


def fail(box: Toolbox, name: str, **arguments: Any) -> str:
    """Call a tool that must fail; return its one-line message."""
    outcome = box.call(name, with_nulls(box, name, arguments))
    assert outcome.is_error, outcome.content
    assert "\n" not in outcome.content
    return outcome.content


def with_nulls(box: Toolbox, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    if name not in box.tools:
        return arguments
    properties = box.tools[name].spec.input_schema["properties"]
    return {key: arguments.get(key) for key in properties} | arguments


# --- the sandbox ---------------------------------------------------------------------


@pytest.fixture
def escapes(root: Path) -> Path:
    """Symlinks inside the root that lead out of it, and a nested git directory."""
    outside = root.parent / "outside"
    (root / "link_dir").symlink_to(outside)
    (root / "link_file").symlink_to(outside / "secret.txt")
    (root / "dangling").symlink_to(outside / "not-yet.txt")
    (root / "sub" / ".git").mkdir(parents=True)
    (root / "sub" / ".git" / "x").write_text(SECRET)
    return outside


ESCAPES = [
    "../outside/secret.txt",
    "/etc/passwd",
    "src/../../outside/secret.txt",
    "a/../../x",
    "link_dir/secret.txt",
    "link_file",
    ".git/config",
    ".GIT/config",
    "./src/../.git/HEAD",
    "sub/.git/x",
    "state/soda.db",
    "src/../state/soda.db",
]


@pytest.mark.parametrize("path", ESCAPES)
def test_reading_outside_the_sandbox_is_refused(box: Toolbox, escapes: Path, path: str) -> None:
    message = fail(box, "read_file", path=path)
    assert SECRET not in message
    assert "repositoryformatversion" not in message


@pytest.mark.parametrize(
    "path", ["link_dir/new.txt", "dangling", "../outside/new.txt", "state/x", ".git/hooks/x"]
)
def test_writing_outside_the_sandbox_is_refused(
    box: Toolbox, escapes: Path, root: Path, path: str
) -> None:
    fail(box, "write_file", path=path, content="pwned")
    assert sorted(p.name for p in escapes.iterdir()) == ["secret.txt"]
    assert not (root / "state" / "x").exists()
    assert not (root / ".git" / "hooks" / "x").exists()


def test_edit_through_a_symlink_out_is_refused(box: Toolbox, escapes: Path) -> None:
    fail(box, "edit_file", path="link_file", old=SECRET, new="changed")
    assert (escapes / "secret.txt").read_text() == SECRET


def test_resolve_allows_paths_that_stay_inside(root: Path) -> None:
    box = sandbox(root)
    assert box.resolve("src/../README.md") == root.resolve() / "README.md"
    assert box.resolve("new/dir/file.txt") == root.resolve() / "new" / "dir" / "file.txt"
    assert box.resolve("") == root.resolve()
    (root / "inner_link").symlink_to(root / "src")
    assert box.resolve("inner_link/app.py") == root.resolve() / "src" / "app.py"


def test_resolve_refuses_a_symlink_to_a_denied_place(root: Path) -> None:
    (root / "sneaky").symlink_to(root / ".git")
    with pytest.raises(ToolError, match="off limits"):
        sandbox(root).resolve("sneaky/config")


def test_a_denied_name_is_refused_even_when_it_leads_somewhere_harmless(root: Path) -> None:
    (root / "vendored").mkdir()
    (root / "vendored" / ".git").symlink_to(root / "src")
    with pytest.raises(ToolError, match="off limits"):
        sandbox(root).resolve("vendored/.git/app.py")


def test_denied_names_match_in_any_case(root: Path) -> None:
    box = Sandbox(root, deny=["Private"])
    for path in ("private/x", "PRIVATE/x", "src/Private"):
        with pytest.raises(ToolError, match="off limits"):
            box.resolve(path)


def test_a_symlink_into_the_state_dir_is_refused(root: Path) -> None:
    (root / "innocent").symlink_to(root / "state")
    with pytest.raises(ToolError, match="soda's own state"):
        sandbox(root).resolve("innocent/soda.db")


def test_a_worktree_git_file_is_denied(root: Path, tmp_path: Path) -> None:
    worktree = tmp_path / "wt"
    git(root, "worktree", "add", "-q", str(worktree), "-b", "work")
    assert (worktree / ".git").is_file()
    box = read_only_tools(Sandbox(worktree))
    fail(box, "read_file", path=".git")
    assert ".git" not in call(box, "list_files").split("\n")
    assert "first commit" in call(box, "git_log")


# --- write, read, edit -----------------------------------------------------------------


def test_write_then_read_with_line_numbers(box: Toolbox, root: Path) -> None:
    assert "created" in call(box, "write_file", path="pkg/deep/mod.py", content="a = 1\nb = 2\n")
    assert call(box, "read_file", path="pkg/deep/mod.py") == "     1\ta = 1\n     2\tb = 2"
    assert "overwrote" in call(box, "write_file", path="pkg/deep/mod.py", content="x\r\ny\r\n")
    assert (root / "pkg" / "deep" / "mod.py").read_bytes() == b"x\r\ny\r\n"


def test_read_window_and_cap(box: Toolbox, root: Path) -> None:
    (root / "long.txt").write_text("".join(f"line {n}\n" for n in range(1, 2501)))
    window = call(box, "read_file", path="long.txt", offset_line=10, max_lines=2)
    assert window.split("\n") == [
        "    10\tline 10",
        "    11\tline 11",
        "[showing lines 10-11 of 2500; read on with offset_line=12]",
    ]
    capped = call(box, "read_file", path="long.txt").split("\n")
    assert len(capped) == MAX_READ_LINES + 1
    assert capped[-2] == f"{MAX_READ_LINES:>6}\tline {MAX_READ_LINES}"
    assert capped[-1] == "[showing lines 1-2000 of 2500; read on with offset_line=2001]"
    assert "past the end" in fail(box, "read_file", path="long.txt", offset_line=2501)


def test_read_caps_characters(box: Toolbox, root: Path) -> None:
    (root / "wide.txt").write_text(("y" * 999 + "\n") * 300)
    lines = call(box, "read_file", path="wide.txt").split("\n")
    assert 90 <= len(lines) <= 110
    assert lines[-1].startswith("[showing lines 1-")


def test_read_refuses_binary_missing_and_directories(box: Toolbox, root: Path) -> None:
    (root / "blob.bin").write_bytes(b"\x89PNG\0\0data")
    assert "binary" in fail(box, "read_file", path="blob.bin")
    assert "does not exist" in fail(box, "read_file", path="nope.txt")
    assert "directory" in fail(box, "read_file", path="src")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("x = 1\n", "not found"), ("old = 1\n", None), ("old = 1\nold = 1\n", "occurs 2 times")],
)
def test_edit_needs_exactly_one_match(
    box: Toolbox, root: Path, text: str, expected: str | None
) -> None:
    (root / "f.py").write_text(text)
    arguments = {"path": "f.py", "old": "old = 1", "new": "new = 2"}
    if expected is None:
        assert "replaced 1 occurrence" in call(box, "edit_file", **arguments)
        assert (root / "f.py").read_text() == "new = 2\n"
    else:  # the message's first line; the closest lines of the file follow it
        outcome = box.call("edit_file", arguments)
        assert outcome.is_error and expected in outcome.content.split("\n")[0]
        assert (root / "f.py").read_text() == text


def test_edit_refuses_an_empty_old_text(box: Toolbox, root: Path) -> None:
    assert "must not be empty" in fail(box, "edit_file", path="README.md", old="", new="x")


# --- list and search -------------------------------------------------------------------


def test_list_skips_git_state_and_caches(box: Toolbox, root: Path, escapes: Path) -> None:
    (root / "src" / "__pycache__").mkdir()
    (root / "src" / "__pycache__" / "app.pyc").write_bytes(b"\0")
    listed = call(box, "list_files").split("\n")
    # link_dir, link_file and dangling lead outside; sub/ holds only a .git directory.
    assert listed == ["README.md", "src/app.py"]
    assert call(box, "list_files", path="src", pattern="*.py") == "src/app.py"
    assert call(box, "list_files", pattern="**/*.md") == "README.md"
    assert call(box, "list_files", pattern="*.rs") == "(no files found)"


def test_list_is_capped(box: Toolbox, root: Path) -> None:
    (root / "many").mkdir()
    for n in range(MAX_LIST_ENTRIES + 20):
        (root / "many" / f"f{n:04}.txt").write_text("")
    listed = call(box, "list_files", path="many").split("\n")
    assert len(listed) == MAX_LIST_ENTRIES + 1
    assert listed[0] == "many/f0000.txt"
    assert listed[-1].startswith(f"[showing {MAX_LIST_ENTRIES} of {MAX_LIST_ENTRIES + 20} files")
    assert "20 more" in listed[-1] and "repo_map" in listed[-1]


def test_search_finds_lines_and_honours_path_and_glob(box: Toolbox, root: Path) -> None:
    (root / "notes.txt").write_text("main idea\n")
    assert call(box, "search_text", pattern=r"def \w+\(") == "src/app.py:1: def main():"
    both = call(box, "search_text", pattern="main").split("\n")
    assert both == ["notes.txt:1: main idea", "src/app.py:1: def main():"]
    assert call(box, "search_text", pattern="main", glob="*.txt") == "notes.txt:1: main idea"
    assert call(box, "search_text", pattern="main", path="src").startswith("src/app.py:1:")
    assert call(box, "search_text", pattern="zzz") == "(no matches)"


def test_search_never_looks_into_git_or_state(box: Toolbox, escapes: Path) -> None:
    assert call(box, "search_text", pattern="repositoryformatversion") == "(no matches)"
    assert call(box, "search_text", pattern=SECRET) == "(no matches)"
    fail(box, "search_text", pattern="x", path=".git")


def test_search_skips_files_it_cannot_read(box: Toolbox, root: Path) -> None:
    (root / "gone").symlink_to(root / "deleted.txt")
    assert call(box, "search_text", pattern="return") == "src/app.py:2:     return 1"


def test_search_is_capped(box: Toolbox, root: Path) -> None:
    (root / "hits.txt").write_text("hit\n" * (MAX_MATCHES + 50))
    lines = call(box, "search_text", pattern="hit").split("\n")
    assert len(lines) == MAX_MATCHES + 1
    assert lines[-1].startswith(f"[stopped at {MAX_MATCHES} matches")


def test_invalid_regex_is_a_tool_error(box: Toolbox) -> None:
    assert "invalid regular expression" in fail(box, "search_text", pattern="(unclosed")


# --- the toolbox -----------------------------------------------------------------------


def test_toolsets_offer_the_right_tools(root: Path) -> None:
    read_only = {
        "read_file",
        "list_files",
        "search_text",
        "repo_map",
        "git_log",
        "git_show",
        "git_diff",
    }
    assert {s.name for s in read_only_tools(sandbox(root)).specs()} == read_only
    worktree = worktree_tools(sandbox(root), 5, 100)
    assert {s.name for s in worktree.specs()} == read_only | {
        "write_file",
        "edit_file",
        "run_command",
    }


def test_every_schema_is_strict_mode_compatible(box: Toolbox) -> None:
    banned = {"minimum", "maximum", "minLength", "maxLength", "pattern", "default", "format"}
    for spec in box.specs():
        schema = spec.input_schema
        assert schema["type"] == "object", spec.name
        assert schema["additionalProperties"] is False, spec.name
        assert schema["required"] == list(schema["properties"]), spec.name
        for prop in schema["properties"].values():
            assert not banned & set(prop), spec.name


def test_unknown_tool_and_bad_arguments_are_error_outcomes(box: Toolbox) -> None:
    assert "unknown tool 'rm_rf'" in fail(box, "rm_rf", path="x")
    missing = box.call("read_file", {"offset_line": None, "max_lines": None})
    assert missing.is_error and "'path' is a required property" in missing.content
    wrong = box.call("read_file", {"path": 3, "offset_line": None, "max_lines": None})
    assert wrong.is_error and "(path)" in wrong.content
    extra = box.call("list_files", {"path": None, "pattern": None, "force": True})
    assert extra.is_error and "force" in extra.content
    boolean = box.call("read_file", {"path": "README.md", "offset_line": True, "max_lines": None})
    assert boolean.is_error


def test_a_crashing_handler_becomes_an_error_outcome() -> None:
    def crash(arguments: dict[str, Any]) -> str:
        raise RuntimeError("boom\nsecond line")

    schema = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
    box = Toolbox([Tool(ToolSpec("crash", "always crashes", schema), crash)])
    outcome = box.call("crash", {})
    assert outcome.is_error
    assert outcome.content == "crash failed unexpectedly: RuntimeError: boom / second line"


def test_duplicate_tool_names_are_refused(root: Path) -> None:
    box = read_only_tools(sandbox(root))
    with pytest.raises(ValueError, match="read_file"):
        box.extended([box.tools["read_file"]])


# --- run_command -----------------------------------------------------------------------


def test_run_command_reports_exit_code_and_output_in_the_root(box: Toolbox, root: Path) -> None:
    output = call(box, "run_command", command="pwd; echo oops >&2; exit 4")
    status, *lines = output.split("\n")
    assert status.startswith("exit code 4 (")
    assert lines == [str(root.resolve()), "oops", ""]


def test_run_command_timeout_kills_grandchildren(box: Toolbox) -> None:
    token = sleep_token()
    started = time.monotonic()
    output = call(
        box, "run_command", command=f"sh -c 'sleep {token} & sleep {token}'", timeout_seconds=1
    )
    assert time.monotonic() - started < 4
    assert output.startswith("timed out after 1s")
    assert live_processes_with(token) == []


def test_run_command_timeout_is_capped_by_the_configured_maximum(root: Path) -> None:
    box = worktree_tools(sandbox(root), command_timeout=0.5, output_limit=100)
    started = time.monotonic()
    output = call(box, "run_command", command="sleep 30", timeout_seconds=100)
    assert time.monotonic() - started < 4
    assert output.startswith("timed out after 0.5s")
    assert "must be positive" in fail(box, "run_command", command="true", timeout_seconds=0)


def test_run_command_output_is_truncated(root: Path) -> None:
    box = worktree_tools(sandbox(root), command_timeout=5, output_limit=100)
    output = call(box, "run_command", command="seq 1 10000")
    assert "characters cut ...]" in output
    assert output.endswith("9999\n10000\n")
    assert len(output) < 200


def test_run_command_does_not_leak_secrets(box: Toolbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FOO_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("SODA_VISIBLE", "yes")
    output = call(box, "run_command", command="env")
    assert "sk-should-not-leak" not in output
    assert "FOO_API_KEY" not in output
    assert "SODA_VISIBLE" not in output  # an allowlist: only PATH, locale, TERM, ... get in
    assert "PATH=" in output
    assert os.environ["FOO_API_KEY"] == "sk-should-not-leak"


def test_run_command_passes_listed_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SODA_VISIBLE", "yes")
    root = tmp_path / "root"
    root.mkdir()
    jail = Jail(
        mode="bwrap", repo_root=root, git_dir=root / ".git", env_passthrough=("SODA_VISIBLE",)
    )
    box = worktree_tools(sandbox(root), command_timeout=5, output_limit=2000, jail=jail)
    assert "SODA_VISIBLE=yes" in call(box, "run_command", command="env")


# --- git -------------------------------------------------------------------------------


@pytest.fixture
def history(root: Path) -> Path:
    (root / "src" / "app.py").write_text("def main():\n    return 2\n")
    git(root, "commit", "-q", "-am", "second: return two")
    (root / "README.md").write_text("# demo, changed\n")
    return root


def test_git_log_lists_commits_newest_first(box: Toolbox, history: Path) -> None:
    lines = call(box, "git_log").split("\n")
    assert [line.split(": ", 1)[1] for line in lines] == ["second: return two", "first commit"]
    assert len(call(box, "git_log", max_count=1).split("\n")) == 1
    assert "first commit" in call(box, "git_log", path="README.md")
    assert "second" not in call(box, "git_log", path="README.md")
    assert "between 1 and" in fail(box, "git_log", max_count=0)


def test_git_show_and_diff(box: Toolbox, history: Path) -> None:
    shown = call(box, "git_show", rev="HEAD")
    assert "second: return two" in shown and "+    return 2" in shown
    assert call(box, "git_show", rev="HEAD~1:src/app.py") == "def main():\n    return 1"
    uncommitted = call(box, "git_diff")
    assert "+# demo, changed" in uncommitted and "src/app.py" not in uncommitted
    ranged = call(box, "git_diff", rev_range="HEAD~1..HEAD", path="src")
    assert "-    return 1" in ranged and "README" not in ranged
    assert call(box, "git_diff", rev_range="HEAD", path="src") == "(no differences)"


def test_git_errors_are_one_line_tool_errors(box: Toolbox, history: Path) -> None:
    assert "git show failed" in fail(box, "git_show", rev="no-such-rev")
    fail(box, "git_log", path="../outside")
    fail(box, "git_diff", path=".git/config")


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("git_show", {"rev": "--output=pwned.txt"}),
        ("git_show", {"rev": " -p"}),
        ("git_diff", {"rev_range": "--output=pwned.txt"}),
        ("git_diff", {"rev_range": "-R"}),
    ],
)
def test_options_cannot_be_injected_as_revisions(
    box: Toolbox, history: Path, tool: str, arguments: dict[str, str]
) -> None:
    assert "looks like an option" in fail(box, tool, **arguments)
    assert not (history / "pwned.txt").exists()


# --- hard links and special files --------------------------------------------------------


def within(seconds: float, action: Callable[[], str], fifo: Path | None = None) -> str:
    """Run `action` in a thread; fail (instead of hanging the suite) if it is not
    done by the deadline. A reader stuck on `fifo` is released afterwards."""
    answer: list[str] = []
    worker = threading.Thread(target=lambda: answer.append(action()), daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive() and fifo is not None:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # lets the stuck open return
    assert not worker.is_alive(), f"still running after {seconds}s"
    return answer[0]


@pytest.fixture
def hard_link(root: Path) -> Path:
    """A hard link inside the sandbox to the secret outside it (what a command could make)."""
    os.link(root.parent / "outside" / "secret.txt", root / "linked.txt")
    return root.parent / "outside" / "secret.txt"


def test_write_through_a_hard_link_is_refused(box: Toolbox, hard_link: Path) -> None:
    assert "hard links" in fail(box, "write_file", path="linked.txt", content="pwned")
    assert hard_link.read_text() == SECRET
    assert os.stat(hard_link).st_nlink == 2  # nothing replaced or unlinked either


def test_edit_through_a_hard_link_is_refused(box: Toolbox, hard_link: Path) -> None:
    assert "hard links" in fail(box, "edit_file", path="linked.txt", old=SECRET, new="pwned")
    assert hard_link.read_text() == SECRET


def test_a_file_with_one_link_is_still_written(box: Toolbox, root: Path) -> None:
    call(box, "write_file", path="src/app.py", content="x = 1\n")
    call(box, "edit_file", path="src/app.py", old="x = 1", new="x = 2")
    assert (root / "src" / "app.py").read_text() == "x = 2\n"


@pytest.fixture
def fifo(root: Path) -> Path:
    path = root / "src" / "pipe"
    os.mkfifo(path)
    return path


def test_search_and_list_skip_a_fifo(box: Toolbox, fifo: Path) -> None:
    found = within(10, lambda: call(box, "search_text", pattern="return"), fifo)
    assert found == "src/app.py:2:     return 1"
    listed = within(10, lambda: call(box, "list_files", path="src"), fifo)
    assert listed == "src/app.py"


def test_read_and_write_refuse_a_fifo(box: Toolbox, fifo: Path) -> None:
    assert "not a regular file" in within(10, lambda: fail(box, "read_file", path="src/pipe"), fifo)
    refused = within(10, lambda: fail(box, "write_file", path="src/pipe", content="x"), fifo)
    assert "not a regular file" in refused
    refused = within(10, lambda: fail(box, "edit_file", path="src/pipe", old="a", new="b"), fifo)
    assert "not a regular file" in refused


def test_a_socket_is_skipped_and_refused(box: Toolbox, root: Path) -> None:
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(root / "src" / "sock"))
        server.listen()
        assert within(10, lambda: call(box, "search_text", pattern="return")).startswith("src/app")
        assert "not a regular file" in fail(box, "read_file", path="src/sock")
        assert call(box, "list_files", path="src") == "src/app.py"


# --- .gitignore ------------------------------------------------------------------------


@pytest.fixture
def ignoring(root: Path) -> Path:
    """The root repository with ignored trees (a node_modules, a .venv, a build/ and
    *.log by pattern) and one untracked file that is not ignored."""
    (root / ".gitignore").write_text("node_modules/\n.venv/\nbuild/\n*.log\n")
    for rel in ("node_modules/pkg/index.js", ".venv/lib/site.py", "build/gen/out.py", "run.log"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("needle = 1\n")
    (root / "src" / "fresh.py").write_text("needle = 2\n")  # untracked, not ignored
    return root


def test_list_and_search_respect_gitignore(box: Toolbox, ignoring: Path) -> None:
    assert call(box, "list_files").split("\n") == [
        ".gitignore",
        "README.md",
        "src/app.py",
        "src/fresh.py",
    ]
    assert call(box, "search_text", pattern="needle") == "src/fresh.py:1: needle = 2"
    assert call(box, "list_files", pattern="*.log") == "(no files found)"


def test_an_ignored_directory_named_on_purpose_is_walked(box: Toolbox, ignoring: Path) -> None:
    assert call(box, "list_files", path="build") == "build/gen/out.py"
    assert (
        call(box, "search_text", pattern="needle", path="build") == "build/gen/out.py:1: needle = 1"
    )


def test_a_tracked_file_in_an_ignored_directory_is_listed(box: Toolbox, ignoring: Path) -> None:
    (ignoring / "build" / "keep.txt").write_text("kept\n")
    git(ignoring, "add", "-f", "build/keep.txt")
    assert call(box, "list_files", path="build") == "build/keep.txt"
    assert "build/keep.txt" in call(box, "list_files").split("\n")


def test_outside_git_the_tree_is_walked(tmp_path: Path) -> None:
    (tmp_path / "build").mkdir()
    (tmp_path / ".gitignore").write_text("build/\n")  # no repository: means nothing
    (tmp_path / "build" / "out.txt").write_text("needle\n")
    box = read_only_tools(Sandbox(tmp_path))
    assert call(box, "list_files").split("\n") == [".gitignore", "build/out.txt"]
    assert call(box, "search_text", pattern="needle") == "build/out.txt:1: needle"


def test_a_directory_ignored_by_an_enclosing_repository_is_walked(root: Path) -> None:
    """A scratch directory under an ignored state/ has nothing in git's listing."""
    (root / ".gitignore").write_text("state/\n")
    scratch = root / "state" / "scratch"
    (scratch / "pkg").mkdir(parents=True)
    (scratch / "pkg" / "mod.py").write_text("x = 1\n")
    box = read_only_tools(Sandbox(scratch))
    assert call(box, "list_files") == "pkg/mod.py"
    assert call(box, "search_text", pattern="x =") == "pkg/mod.py:1: x = 1"


def test_deleted_and_state_files_are_not_listed(box: Toolbox, root: Path) -> None:
    (root / "README.md").unlink()  # still in git's index
    assert call(box, "list_files").split("\n") == ["src/app.py"]


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        (r"^def", ["a.py:1: def main():", "a.py:3: def other():"]),
        (r"\):$", ["a.py:1: def main():", "a.py:3: def other():"]),
        (r"(?<!\w)return", ["a.py:2:     return 1"]),
        (r"(?<![\s\S])def", ["a.py:1: def main():", "a.py:3: def other():"]),
        (r"\Adef", ["a.py:1: def main():", "a.py:3: def other():"]),
        (r"main(?![\s\S]*other)", ["a.py:1: def main():"]),
        (r"1\n$", ["a.py:2:     return 1"]),
        (r"main|other", ["a.py:1: def main():", "a.py:3: def other():"]),
        (r"\n", ["a.py:1: def main():", "a.py:2:     return 1"]),
        (r"absent", ["(no matches)"]),
    ],
)
def test_search_matches_line_by_line(tmp_path: Path, pattern: str, expected: list[str]) -> None:
    """Each line is matched on its own, as it reads with its newline, whatever the
    pattern looks at (string ends, lookbehind, negative lookahead)."""
    (tmp_path / "a.py").write_bytes(b"def main():\r\n    return 1\ndef other():")
    box = read_only_tools(Sandbox(tmp_path))
    assert call(box, "search_text", pattern=pattern).split("\n") == expected


def test_git_listing_runs_no_planted_fsmonitor(
    box: Toolbox, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GIT_CONFIG_PARAMETERS", raising=False)  # only our own options
    marker = tmp_path / "fsmonitor-ran"
    script = tmp_path / "fsmonitor.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\n")
    script.chmod(0o755)
    git(root, "config", "core.fsmonitor", str(script))
    assert call(box, "list_files").split("\n") == ["README.md", "src/app.py"]
    call(box, "search_text", pattern="main")
    call(box, "repo_map")
    assert not marker.exists()
