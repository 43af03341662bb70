"""The tools as Anthropic's guidance for tool definitions asks (issue 18, item 6):
every tool described in 3-5 sentences and every parameter described; arguments a
model leaves out filled in; edit_file answering with the edited region or the
closest lines; search_text with context, files_only and indentation; git_diff
with new files; and run_command's claims about the jail, the undo recipe
included, checked in the real jail. Real files, real git repositories, the real
bubblewrap jail; no model at all."""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from soda.config import Config, SandboxConfig
from soda.gate.runner import TestReport
from soda.system.jail import Jail
from soda.tools import Sandbox, Toolbox, read_only_tools, worktree_tools
from soda.tools.ask import ask_tools
from soda.tools.edits import CONTEXT_LINES, MAX_SHOWN_REGIONS, MAX_SIMILAR_LINES
from soda.tools.git import MAX_NEW_FILE_LINES, MAX_NEW_FILES
from soda.tools.search import MAX_CONTEXT, MAX_CONTEXT_MATCHES, MAX_MATCHES
from soda.tools.tests import test_tools as run_tests_tools
from soda.tools.toolbox import MAX_ERROR_DETAIL_CHARS
from tests.conftest import git
from tests.test_proc import live_processes_with, sleep_token

SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`'(])")

# Parameters typed as a union (a type list or anyOf) before these changes: Anthropic's
# strict tool use refuses a request with more than 16 over all its tools, and the
# orienter's contract brings 5 more, so the tools must not add any.
UNIONS_BEFORE = {"executor": 12, "read_only": 11}
EXECUTOR_SPEC_CHARS = 10_000
"""A bound on the executor's tool specs (sent with every request): 4,571 before."""


def sentences(text: str) -> list[str]:
    return [part for part in SENTENCE_END.split(text.strip()) if part]


def unions(schema: Any) -> int:
    if isinstance(schema, list):
        return sum(unions(item) for item in schema)
    if not isinstance(schema, dict):
        return 0
    own = "anyOf" in schema or (isinstance(schema.get("type"), list) and len(schema["type"]) > 1)
    return int(own) + sum(unions(value) for value in schema.values())


def executor_box(root: Path, jail: Jail | None = None) -> Toolbox:
    """The executor's toolbox: the worktree tools plus ask_human."""
    box = worktree_tools(Sandbox(root), command_timeout=30, output_limit=20_000, jail=jail)
    return box.extended(ask_tools(lambda question: 1, lambda *kept: None))


def never_run() -> tuple[TestReport, bool]:
    raise AssertionError("run_tests is only described here, never called")


def orient_box(root: Path) -> Toolbox:
    """ORIENT's toolbox: the read-only tools plus run_tests."""
    return read_only_tools(Sandbox(root)).extended(run_tests_tools(never_run, "0" * 40))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A repository with one commit: calc.py, and an ignored build directory."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".gitignore").write_text("build/\nstate/\n")
    (repo / "calc.py").write_text(CALC)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "calc")
    return repo


CALC = '''"""A calculator."""


def add(a: float, b: float) -> float:
    """Sum of a and b."""
    return a + b


def mul(a: float, b: float) -> float:
    return a * b
'''


@pytest.fixture
def box(root: Path) -> Toolbox:
    return executor_box(root)


def ok(box: Toolbox, name: str, **arguments: Any) -> str:
    outcome = box.call(name, arguments)
    assert not outcome.is_error, outcome.content
    return outcome.content


def error(box: Toolbox, name: str, **arguments: Any) -> tuple[str, list[str]]:
    """A failing call's one-line message and the lines after it."""
    outcome = box.call(name, arguments)
    assert outcome.is_error, outcome.content
    first, *rest = outcome.content.split("\n")
    return first, rest


# --- descriptions ------------------------------------------------------------------


def all_specs(root: Path) -> dict[str, Any]:
    specs = {spec.name: spec for spec in executor_box(root).specs()}
    specs.update({spec.name: spec for spec in orient_box(root).specs()})
    return specs


def test_every_tool_is_described_in_three_to_five_sentences(root: Path) -> None:
    specs = all_specs(root)
    assert len(specs) == 12
    for name, spec in specs.items():
        count = len(sentences(spec.description))
        assert 3 <= count <= 5, f"{name}: {count} sentences: {spec.description}"


def test_every_parameter_is_described(root: Path) -> None:
    for name, spec in all_specs(root).items():
        for key, schema in spec.input_schema["properties"].items():
            words = schema.get("description", "").split()
            assert len(words) >= 5, f"{name}.{key} is not described: {schema}"


def test_paths_are_said_to_be_relative_and_absolute_ones_are_refused(
    box: Toolbox, root: Path
) -> None:
    for name, spec in all_specs(root).items():
        for key, schema in spec.input_schema["properties"].items():
            if key == "path":
                assert "relative to the repository root" in schema["description"], name
    message, _ = error(box, "read_file", path=str(root / "calc.py"))
    assert "absolute" in message and "relative to the repository root" in message


def test_edit_file_warns_against_the_line_number_prefix(root: Path) -> None:
    described = all_specs(root)["edit_file"].description
    assert "Never include read_file's line-number prefix" in described


def test_the_new_parameters_add_no_union_type_and_the_specs_stay_small(root: Path) -> None:
    executor = executor_box(root).specs()
    assert unions([spec.input_schema for spec in executor]) == UNIONS_BEFORE["executor"]
    read_only = read_only_tools(Sandbox(root)).specs()
    assert unions([spec.input_schema for spec in read_only]) == UNIONS_BEFORE["read_only"]
    size = sum(
        len(json.dumps({"name": s.name, "description": s.description, "schema": s.input_schema}))
        for s in executor
    )
    assert size < EXECUTOR_SPEC_CHARS


def test_run_command_describes_the_jail_it_runs_in(root: Path) -> None:
    def described(jail: Jail) -> str:
        return executor_box(root, jail).tools["run_command"].spec.description

    jail = Jail(mode="bwrap", repo_root=root, git_dir=root / ".git")
    assert "no network" in described(jail) and "read-only" in described(jail)
    networked = described(Jail(mode="bwrap", repo_root=root, git_dir=root / ".git", network=True))
    assert "network on" in networked and "no network" not in networked
    unconfined = described(Jail(mode="none", repo_root=root, git_dir=root / ".git"))
    assert "unconfined" in unconfined and "jail" not in unconfined
    assert "git show HEAD:path > path" in unconfined  # the undo works there too


# --- absent optional arguments -----------------------------------------------------


def test_tools_take_only_their_required_arguments(box: Toolbox, root: Path) -> None:
    assert ok(box, "read_file", path="calc.py").startswith('     1\t"""A calculator."""')
    assert ok(box, "list_files") == ".gitignore\ncalc.py"
    assert (
        ok(box, "search_text", pattern="def add")
        == "calc.py:4: def add(a: float, b: float) -> float:"
    )
    assert "def add(a: float, b: float)" in ok(box, "repo_map")
    assert "calc" in ok(box, "git_log")
    assert ok(box, "git_diff") == "(no differences)"
    assert ok(box, "run_command", command="echo hi").endswith("\nhi\n")
    edited = ok(box, "edit_file", path="calc.py", old="return a * b", new="return b * a")
    assert "replaced 1 occurrence" in edited


def test_null_for_a_defaulted_argument_means_its_default(box: Toolbox) -> None:
    answer = ok(box, "search_text", pattern="return a", context=None, files_only=None)
    assert answer == "calc.py:6:     return a + b\ncalc.py:10:     return a * b"


def test_filled_arguments_are_still_validated(box: Toolbox) -> None:
    message, _ = error(box, "edit_file", path="calc.py", old="a", new="b", replace_all="yes")
    assert "replace_all" in message
    message, _ = error(box, "read_file", offset_line=2)
    assert "'path' is a required property" in message


# --- edit_file ---------------------------------------------------------------------


def test_a_failed_edit_shows_the_closest_lines(box: Toolbox, root: Path) -> None:
    message, lines = error(box, "edit_file", path="calc.py", old="    return a+b\n", new="x")
    assert message.startswith("edit_file: old text not found in calc.py.")
    assert "closest lines" in message
    assert lines == [
        "     4\tdef add(a: float, b: float) -> float:",
        '     5\t    """Sum of a and b."""',
        "     6\t    return a + b",
        "     7\t",
        "     8\t",
    ]
    assert (root / "calc.py").read_text() == CALC


def test_a_copied_line_number_prefix_is_named(box: Toolbox) -> None:
    old = '     5\t    """Sum of a and b."""\n     6\t    return a + b\n'
    message, lines = error(box, "edit_file", path="calc.py", old=old, new="x")
    assert "line-number prefixes" in message and "leave them out" in message
    assert '     5\t    """Sum of a and b."""' in lines
    assert "     6\t    return a + b" in lines


def test_a_whitespace_only_difference_is_named(box: Toolbox) -> None:
    message, lines = error(box, "edit_file", path="calc.py", old="  return a + b  ", new="x")
    assert "differ only in whitespace" in message
    assert "     6\t    return a + b" in lines


def test_nothing_alike_is_said_plainly(box: Toolbox) -> None:
    message, lines = error(box, "edit_file", path="calc.py", old="zzzz qqqq", new="x")
    assert "no lines of it are alike" in message and lines == []


def test_the_closest_lines_are_bounded(box: Toolbox, root: Path) -> None:
    (root / "big.py").write_text("".join(f"value_{n} = {n}\n" for n in range(5000)))
    old = "".join(f"value_{n} = {n}!\n" for n in range(2000, 2100))
    _, lines = error(box, "edit_file", path="big.py", old=old, new="x")
    assert 0 < len(lines) <= MAX_SIMILAR_LINES
    assert lines[0] == "  1999\tvalue_1998 = 1998"  # the window, two lines of margin before
    wide = "x" * 3000
    (root / "wide.py").write_text("".join(f"{wide}{n}\n" for n in range(40)))
    outcome = box.call("edit_file", {"path": "wide.py", "old": f"{wide}7\n{wide}8!", "new": ""})
    assert outcome.is_error and len(outcome.content) < MAX_ERROR_DETAIL_CHARS + 600


def test_several_occurrences_are_shown_and_replace_all_replaces_them(
    box: Toolbox, root: Path
) -> None:
    message, lines = error(box, "edit_file", path="calc.py", old="-> float:", new="-> int:")
    assert "occurs 2 times" in message and "replace_all" in message
    assert lines == [
        "     4\tdef add(a: float, b: float) -> float:",
        "--",
        "     9\tdef mul(a: float, b: float) -> float:",
    ]
    answer = ok(box, "edit_file", path="calc.py", old="-> float:", new="-> int:", replace_all=True)
    assert answer.startswith("edited calc.py: replaced 2 occurrences\n")
    assert (root / "calc.py").read_text() == CALC.replace("-> float:", "-> int:")
    assert "     4\tdef add(a: float, b: float) -> int:" in answer
    assert "     9\tdef mul(a: float, b: float) -> int:" in answer


def test_replace_all_with_many_occurrences_shows_a_few_regions(box: Toolbox, root: Path) -> None:
    (root / "many.py").write_text("".join(f"x{n} = OLD\n" + "\n" * 10 for n in range(40)))
    answer = ok(box, "edit_file", path="many.py", old="OLD", new="NEW", replace_all=True)
    assert answer.startswith("edited many.py: replaced 40 occurrences\n")
    assert answer.count("--") == MAX_SHOWN_REGIONS - 1
    assert answer.endswith(f"[{40 - MAX_SHOWN_REGIONS} more edited regions not shown]")
    assert "OLD" not in (root / "many.py").read_text()


def test_a_successful_edit_shows_the_edited_region(box: Toolbox, root: Path) -> None:
    (root / "lines.txt").write_text("".join(f"line {n}\n" for n in range(1, 21)))
    answer = ok(box, "edit_file", path="lines.txt", old="line 10\n", new="ten\nTEN\n")
    first = 10 - CONTEXT_LINES
    expected = [f"{n:>6}\tline {n}" for n in range(first, 10)]
    expected += ["    10\tten", "    11\tTEN"]
    expected += [f"{n + 1:>6}\tline {n}" for n in range(11, 11 + CONTEXT_LINES)]
    assert answer.split("\n") == ["edited lines.txt: replaced 1 occurrence", *expected]
    deleted = ok(box, "edit_file", path="lines.txt", old="ten\nTEN\n", new="")
    after = [(7, 7), (8, 8), (9, 9), (10, 11), (11, 12), (12, 13), (13, 14)]
    assert deleted.split("\n")[1:] == [f"{number:>6}\tline {n}" for number, n in after]


# --- search_text -------------------------------------------------------------------


def test_search_keeps_indentation_and_shows_context(box: Toolbox) -> None:
    assert ok(box, "search_text", pattern="return a \\+") == "calc.py:6:     return a + b"
    assert ok(box, "search_text", pattern="^    return", context=1).split("\n") == [
        'calc.py-5-     """Sum of a and b."""',
        "calc.py:6:     return a + b",
        "calc.py-7- ",
        "--",
        "calc.py-9- def mul(a: float, b: float) -> float:",
        "calc.py:10:     return a * b",
    ]


def test_search_context_is_bounded_and_not_negative(box: Toolbox, root: Path) -> None:
    (root / "long.txt").write_text("".join(f"row {n}\n" for n in range(1, 61)))
    shown = ok(box, "search_text", pattern="^row 30$", path="long.txt", context=50).split("\n")
    assert shown[0] == f"long.txt-{30 - MAX_CONTEXT}- row {30 - MAX_CONTEXT}"
    assert shown[-1] == f"long.txt-{30 + MAX_CONTEXT}- row {30 + MAX_CONTEXT}"
    assert len(shown) == 2 * MAX_CONTEXT + 1
    message, _ = error(box, "search_text", pattern="row", context=-1)
    assert "context must be 0 or more" in message
    (root / "hits.txt").write_text("hit\n" * (MAX_CONTEXT_MATCHES + 5))
    capped = ok(box, "search_text", pattern="hit", path="hits.txt", context=1).split("\n")
    assert sum(line.startswith("hits.txt:") for line in capped) == MAX_CONTEXT_MATCHES
    assert capped[-1].startswith(f"[stopped at {MAX_CONTEXT_MATCHES} matches")


def test_search_files_only_lists_files_with_counts(box: Toolbox, root: Path) -> None:
    (root / "pkg").mkdir()
    (root / "pkg" / "one.py").write_text("float\n")
    (root / "pkg" / "notes.txt").write_text("float\nfloat\n")
    (root / "build").mkdir()
    (root / "build" / "gen.py").write_text("float\n")  # ignored: never searched
    assert ok(box, "search_text", pattern="float", files_only=True).split("\n") == [
        "calc.py: 2 matching lines",
        "pkg/notes.txt: 2 matching lines",
        "pkg/one.py: 1 matching line",
    ]
    assert ok(box, "search_text", pattern="float", glob="*.py", files_only=True) == (
        "calc.py: 2 matching lines\npkg/one.py: 1 matching line"
    )
    for n in range(MAX_MATCHES + 3):
        (root / "pkg" / f"f{n:03}.txt").write_text("needle\n")
    listed = ok(box, "search_text", pattern="needle", files_only=True).split("\n")
    assert len(listed) == MAX_MATCHES + 1
    assert listed[-1].startswith(f"[stopped at {MAX_MATCHES} files")


# --- git_diff ----------------------------------------------------------------------


def test_git_diff_shows_a_new_file_without_touching_the_index(box: Toolbox, root: Path) -> None:
    index = (root / ".git" / "index").read_bytes()
    ok(box, "write_file", path="tests/test_calc.py", content="def test_add():\n    assert 1\n")
    ok(box, "edit_file", path="calc.py", old="return a * b", new="return b * a")
    (root / "build").mkdir()
    (root / "build" / "out.txt").write_text("ignored\n")
    (root / "state").mkdir()
    (root / "state" / "x.db").write_text("ignored too\n")
    diff = ok(box, "git_diff")
    assert "+    return b * a" in diff
    new = diff[diff.index("diff --git a/tests/test_calc.py") :]
    assert new.split("\n") == [
        "diff --git a/tests/test_calc.py b/tests/test_calc.py",
        "new file mode 100644",
        "--- /dev/null",
        "+++ b/tests/test_calc.py",
        "@@ -0,0 +1,2 @@",
        "+def test_add():",
        "+    assert 1",
    ]
    assert "build/" not in diff and "state/" not in diff
    assert ok(box, "git_diff", path="tests").startswith("diff --git a/tests/test_calc.py")
    assert "test_calc" not in ok(box, "git_diff", path="calc.py")
    assert "test_calc" not in ok(box, "git_diff", rev_range="HEAD")  # a revision: git's own diff
    assert (root / ".git" / "index").read_bytes() == index
    assert not (root / ".git" / "index.lock").exists()


def test_git_diff_bounds_new_files(box: Toolbox, root: Path) -> None:
    (root / "long.txt").write_text("".join(f"{n}\n" for n in range(MAX_NEW_FILE_LINES + 50)))
    (root / "blob.bin").write_bytes(b"\0\1\2" * 10)
    diff = ok(box, "git_diff")
    assert f"+{MAX_NEW_FILE_LINES - 1}\n[... 50 more lines; read_file long.txt]" in diff
    assert f"+{MAX_NEW_FILE_LINES}\n" not in diff
    assert "Binary files /dev/null and b/blob.bin differ" in diff
    for n in range(MAX_NEW_FILES + 3):
        (root / f"new{n:02}.txt").write_text("x\n")
    many = ok(box, "git_diff")
    assert many.count("new file mode") == MAX_NEW_FILES
    assert many.split("\n")[-1].startswith("[5 more new files not shown: ")


# --- run_command's claims, in the real jail ----------------------------------------


@pytest.fixture
def jailed(root: Path) -> tuple[Toolbox, Path, Jail]:
    """The executor's toolbox in a worktree of `root` under state/, run in the
    jail the configuration makes, as ACT does."""
    real = Path(os.path.realpath(root))
    worktree = real / "state" / "worktrees" / "task"
    git(real, "worktree", "add", "-q", "--detach", str(worktree), "HEAD")
    jail = Jail.for_config(Config(root=real, sandbox=SandboxConfig()))
    return executor_box(worktree, jail), worktree, jail


def shell(box: Toolbox, command: str) -> tuple[int, str]:
    """run_command's exit code and output."""
    status, _, output = ok(box, "run_command", command=command).partition("\n")
    code = re.match(r"exit code (-?\d+) ", status)
    assert code, status
    return int(code.group(1)), output


def test_the_undo_recipes_in_the_description_work_in_the_jail(
    jailed: tuple[Toolbox, Path, Jail],
) -> None:
    box, worktree, _ = jailed
    described = box.tools["run_command"].spec.description
    restore, reverse, remove = re.findall(r"`([^`]+)`", described)
    assert (restore, reverse, remove) == (
        "git show HEAD:path > path",
        "git diff path | git apply -R",
        "rm path",
    )
    for recipe in (restore, reverse):
        ok(box, "edit_file", path="calc.py", old="return a + b", new="return a - b")
        assert ok(box, "git_diff") != "(no differences)"
        assert shell(box, recipe.replace("path", "calc.py"))[0] == 0, recipe
        assert (worktree / "calc.py").read_text() == CALC, recipe
        assert ok(box, "git_diff") == "(no differences)"
    ok(box, "write_file", path="scratch.py", content="x = 1\n")
    assert shell(box, remove.replace("path", "scratch.py"))[0] == 0
    assert ok(box, "git_diff") == "(no differences)"


def test_git_reads_work_and_the_named_writes_fail_in_the_jail(
    jailed: tuple[Toolbox, Path, Jail],
) -> None:
    box, worktree, _ = jailed
    described = box.tools["run_command"].spec.description
    assert "git status, diff, log and show work" in described
    assert "git add, commit, stash, checkout and restore fail" in described
    head = git(worktree, "rev-parse", "HEAD")
    ok(box, "edit_file", path="calc.py", old="return a + b", new="return a - b")
    changed = (worktree / "calc.py").read_text()
    for read in ("git status", "git diff", "git log -1", "git show --stat HEAD"):
        assert shell(box, read)[0] == 0, read
    who = "-c user.name=soda -c user.email=soda@example.invalid"
    for write in (
        "git add calc.py",
        f"git {who} commit -qam planted",
        f"git {who} stash",
        "git checkout -- calc.py",
        "git restore calc.py",
    ):
        code, output = shell(box, write)
        assert code != 0, f"{write!r} succeeded in the jail: {output}"
        assert (worktree / "calc.py").read_text() == changed, write
    assert git(worktree, "rev-parse", "HEAD") == head
    assert git(worktree, "stash", "list") == ""


def test_home_tmp_network_and_processes_are_as_described(
    jailed: tuple[Toolbox, Path, Jail],
) -> None:
    box, _, jail = jailed
    described = box.tools["run_command"].spec.description
    assert "no network" in described
    assert "a private /tmp emptied after each command" in described
    assert "HOME is empty but for read-only toolchains" in described
    assert "every process it starts is killed when it ends" in described
    home = Path.home()
    toolchains = {p.relative_to(home).parts[0] for p in jail.expose if p.is_relative_to(home)}
    code, listing = shell(box, 'ls -A "$HOME"')
    assert code == 0 and set(listing.split()) <= toolchains
    probe = f"/tmp/soda-probe-{uuid.uuid4().hex}"
    assert shell(box, f"echo x > {probe} && cat {probe}") == (0, "x\n")
    assert shell(box, f"test -e {probe}")[0] != 0
    assert not Path(probe).exists()
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        connect = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)"
        assert shell(box, f'{sys.executable} -c "{connect}"')[0] != 0
    token = sleep_token()
    assert shell(box, f"setsid sleep {token} > /dev/null 2>&1 & echo started") == (0, "started\n")
    assert live_processes_with(token) == []
