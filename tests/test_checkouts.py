"""The checkout pool on a real repository: `view` moves between commits and stays
clean, `work` forks the iteration's branch from the milestone tip and `release`
deletes it, `remove_all` unregisters everything, and `tested` caches by tree id."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from git import Repo

from soda.config import load
from soda.errors import GitError
from soda.gate import tested as cached_test_run  # not a test
from soda.repo.checkouts import Checkouts
from soda.repo.refs import branch_head
from soda.repo.workspace import land, prepare_merge
from soda.store import open_db
from soda.system.jail import Jail
from tests.conftest import git


@pytest.fixture
def commits(repo: Path) -> tuple[str, str]:
    """Two commits on main: A (README, old.txt, an ignore rule) and B (README
    edited, old.txt removed, new.txt added); soda/spec points at B."""
    (repo / ".gitignore").write_text("*.log\nbuild/\n")
    (repo / "old.txt").write_text("old\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "A")
    a = git(repo, "rev-parse", "HEAD")
    (repo / "README.md").write_text("# sample, edited\n")
    (repo / "old.txt").unlink()
    (repo / "new.txt").write_text("new\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "B")
    b = git(repo, "rev-parse", "HEAD")
    git(repo, "branch", "soda/spec", b)
    return a, b


def pool(repo: Path) -> Checkouts:
    return Checkouts(Repo(repo), repo / "state" / "worktrees")


def soil(path: Path) -> None:
    """What a test run may leave behind: an edit, untracked and ignored files."""
    (path / "README.md").write_text("changed by a test run\n")
    (path / "untracked.py").write_text("x = 1\n")
    (path / "run.log").write_text("ignored\n")
    (path / "build").mkdir()
    (path / "build" / "out.bin").write_text("ignored too\n")


def assert_clean_at(path: Path, commit: str) -> None:
    assert git(path, "rev-parse", "HEAD") == commit
    assert git(path, "status", "--porcelain", "--ignored", "--untracked-files=all") == ""


def registered(repo: Path) -> list[str]:
    listing = git(repo, "worktree", "list", "--porcelain")
    return [line.split(" ", 1)[1] for line in listing.splitlines() if line.startswith("worktree ")]


def test_view_moves_and_drops_untracked_ignored_files_and_edits(
    repo: Path, commits: tuple[str, str]
) -> None:
    a, b = commits
    checkouts = pool(repo)
    path = checkouts.view(a, run=True)  # lent out for a test run
    assert_clean_at(path, a)
    assert (path / "old.txt").exists()
    soil(path)

    assert checkouts.view(b) == path  # moved in place, not re-created
    assert_clean_at(path, b)
    assert not (path / "old.txt").exists()
    assert (path / "new.txt").read_text() == "new\n"
    assert (path / "README.md").read_text() == "# sample, edited\n"

    # A read-only view moves to another commit cleanly too.
    assert checkouts.view(a) == path
    assert_clean_at(path, a)
    assert not (path / "new.txt").exists()
    checkouts.remove_all()


def test_a_new_pool_cleans_a_view_it_did_not_make(repo: Path, commits: tuple[str, str]) -> None:
    a, _ = commits
    path = pool(repo).view(a)
    soil(path)
    # Another process (a new run) finds the checkout: it vouches for nothing in it.
    assert pool(repo).view(a) == path
    assert_clean_at(path, a)


def git_spy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `git` first on PATH that logs its subcommand and runs the real git: the
    real processes soda starts, counted."""
    real = shutil.which("git")
    assert real is not None
    bin_dir = tmp_path / "spy-bin"
    bin_dir.mkdir()
    log = tmp_path / "git-calls.log"
    spy = bin_dir / "git"
    spy.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {real} "$@"\n')
    spy.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


def subcommands(log: Path) -> list[str]:
    """The git subcommands logged so far (after the -c and -C options), then clear."""
    if not log.exists():
        return []
    found = []
    for line in log.read_text().splitlines():
        words = line.split()
        while words and words[0] in ("-c", "-C"):
            words = words[2:]
        found.append(words[0] if words else "")
    log.unlink()
    return found


def test_a_clean_view_in_place_costs_no_git_process(
    repo: Path, commits: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = commits
    checkouts = pool(repo)
    checkouts.view(a)
    checkouts.view(b)  # the object reader (one long-lived `cat-file`) has started
    checkouts.view(a)
    log = git_spy(tmp_path, monkeypatch)
    checkouts.view(a)
    assert subcommands(log) == []
    checkouts.view(b)  # clean before: a reset moves it, nothing to clean
    assert subcommands(log) == ["reset"]
    assert_clean_at(checkouts.root / "view", b)
    subcommands(log)
    checkouts.view(b, run=True)
    checkouts.view(b)  # code ran there: reset and clean
    assert subcommands(log) == ["reset", "clean"]


def test_work_forks_the_milestone_tip_and_release_deletes_the_branch(
    repo: Path, commits: tuple[str, str]
) -> None:
    _, b = commits
    checkouts = pool(repo)
    ws = checkouts.work("soda/spec", "soda-work/spec/iter-1")
    assert ws.fork_point == b and ws.head() == b
    assert git(ws.path, "branch", "--show-current") == "soda-work/spec/iter-1"
    assert_clean_at(ws.path, b)

    assert ws.commit_all("nothing") is None
    (ws.path / "feature.py").write_text("y = 2\n")
    (ws.path / "debug.log").write_text("ignored, not committed\n")
    commit = ws.commit_all("feature")
    assert commit == git(ws.path, "rev-parse", "HEAD") == ws.head()
    assert git(repo, "show", f"{commit}:feature.py") == "y = 2"

    checkouts.release(ws)
    assert git(repo, "branch", "--list", "soda-work/*") == ""
    assert git(ws.path, "branch", "--show-current") == ""  # detached
    assert branch_head(Repo(repo), "soda/spec") == b  # the milestone did not move

    again = checkouts.work("soda/spec", "soda-work/spec/iter-2")
    assert again.path == ws.path
    assert_clean_at(again.path, b)
    assert not (again.path / "feature.py").exists()
    assert not (again.path / "debug.log").exists()
    checkouts.release(again)
    checkouts.remove_all()


def test_remove_all_leaves_no_worktree_registered(repo: Path, commits: tuple[str, str]) -> None:
    a, _ = commits
    checkouts = pool(repo)
    checkouts.view(a)
    checkouts.release(checkouts.work("soda/spec", "soda-work/spec/iter-1"))
    assert len(registered(repo)) == 3
    checkouts.remove_all()
    assert registered(repo) == [str(repo)]
    assert not (checkouts.root / "view").exists()
    assert not (checkouts.root / "work-0").exists()
    # The pool comes back on the next use, and goes again.
    assert_clean_at(checkouts.view(a), a)
    checkouts.remove_all()
    assert registered(repo) == [str(repo)]


def test_a_view_deleted_behind_the_pools_back_is_made_again(
    repo: Path, commits: tuple[str, str]
) -> None:
    import shutil

    a, b = commits
    checkouts = pool(repo)
    path = checkouts.view(a)
    shutil.rmtree(path)  # still registered with git, the directory gone
    assert checkouts.view(b) == path
    assert_clean_at(path, b)
    checkouts.remove_all()
    assert registered(repo) == [str(repo)]


def test_land_refuses_when_the_milestone_moved_after_catch_up(
    repo: Path, commits: tuple[str, str]
) -> None:
    _, b = commits
    checkouts = pool(repo)
    ws = checkouts.work("soda/spec", "soda-work/spec/iter-1")
    (ws.path / "mine.txt").write_text("mine\n")
    ws.commit_all("mine")
    assert ws.catch_up()
    candidate, expected = prepare_merge(ws, "soda: mine")
    assert expected == b
    assert git(repo, "rev-parse", f"{candidate}^1", f"{candidate}^2").split() == [b, ws.head()]
    # Someone moves the milestone while the candidate is tested.
    git(repo, "branch", "-f", "soda/spec", "main~1")
    moved = git(repo, "rev-parse", "soda/spec")
    with pytest.raises(GitError, match="moved from"):
        land(Repo(repo), "soda/spec", candidate, expected)
    assert git(repo, "rev-parse", "soda/spec") == moved
    checkouts.release(ws)
    checkouts.remove_all()


def test_tested_caches_by_tree_id(repo: Path, commits: tuple[str, str], tmp_path: Path) -> None:
    _, b = commits
    counter = tmp_path / "runs.txt"  # outside the repository: the test command counts here
    (repo / "soda.toml").write_text(
        f'[project]\nspec = "README.md"\ntest_command = "echo run >> {counter}"\n\n'
        '[sandbox]\nmode = "none"\n'
    )
    config = load(repo / "soda.toml")
    jail = Jail.for_config(config, repo / ".git")
    db = open_db(config.db_path)
    checkouts = Checkouts(Repo(repo), config.state_dir / "worktrees")

    report, cached = cached_test_run(config, jail, db, checkouts, b)
    assert (report.returncode, cached) == (0, False)
    assert counter.read_text() == "run\n"

    # Another commit with the same tree: the result comes from the cache.
    git(repo, "commit", "-q", "--allow-empty", "-m", "same tree, another commit")
    same_tree = git(repo, "rev-parse", "HEAD")
    assert same_tree != b
    report, cached = cached_test_run(config, jail, db, checkouts, same_tree)
    assert (report.returncode, cached) == (0, True)
    assert counter.read_text() == "run\n"

    # A different tree runs the tests again, on a clean checkout of that commit.
    (repo / "more.txt").write_text("more\n")
    git(repo, "add", "more.txt")
    git(repo, "commit", "-q", "-m", "another tree")
    other = git(repo, "rev-parse", "HEAD")
    _, cached = cached_test_run(config, jail, db, checkouts, other)
    assert cached is False
    assert counter.read_text() == "run\nrun\n"
    assert_clean_at(checkouts.view(other), other)
    rows = db.execute("SELECT COUNT(*) FROM test_results").fetchone()[0]
    assert rows == 2
    checkouts.remove_all()


def test_tasks_at_the_same_time_get_trees_of_their_own_reused_later(
    repo: Path, commits: tuple[str, str]
) -> None:
    _, b = commits
    checkouts = pool(repo)
    first = checkouts.work("soda/spec", "soda-work/spec/iter-1-a")
    second = checkouts.work("soda/spec", "soda-work/spec/iter-1-b")
    assert (first.path.name, second.path.name) == ("work-0", "work-1")
    (first.path / "a.txt").write_text("a\n")
    assert not (second.path / "a.txt").exists()
    checkouts.release(first)
    third = checkouts.work("soda/spec", "soda-work/spec/iter-2-c")
    assert third.path == first.path  # the freed tree, cleaned
    assert_clean_at(third.path, b)
    checkouts.release(second)
    checkouts.release(third)
    assert git(repo, "branch", "--list", "soda-work/*") == ""
    checkouts.remove_all()
    assert registered(repo) == [str(repo)]


def test_a_kept_tree_is_not_handed_out_nor_removed(repo: Path, commits: tuple[str, str]) -> None:
    checkouts = pool(repo)
    waiting = checkouts.work("soda/spec", "soda-work/spec/iter-1-q")
    (waiting.path / "half.txt").write_text("half done\n")
    checkouts.keep(waiting)
    other = checkouts.work("soda/spec", "soda-work/spec/iter-2-x")
    assert other.path != waiting.path
    checkouts.release(other)
    checkouts.remove_all()
    assert checkouts.kept() == {"soda-work/spec/iter-1-q": waiting.path}
    assert (waiting.path / "half.txt").exists()
    assert registered(repo) == [str(repo), str(waiting.path)]
    checkouts.release(waiting)  # the answer came: the tree goes back to the pool
    assert checkouts.kept() == {}
    checkouts.remove_all()
    assert registered(repo) == [str(repo)]
