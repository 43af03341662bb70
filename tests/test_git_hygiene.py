"""soda's own git processes never run programs the repository's config names.

An agent that can write `.git` may plant hooks or set core.fsmonitor /
core.hooksPath; each test plants one such program (a script that records that it
ran), drives soda's git operations as ACT, SENSE and the agents' git tools do,
and asserts the record was never written. A control test proves each plant does
fire for a plain git, so a silent plant cannot make the others pass.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from git import Repo

from soda.config import Config
from soda.loop.sense import SenseInput, code_claims
from soda.repo.checkouts import Checkouts
from soda.repo.git import CONFIG_PARAMETERS, commit_all, harden_git_environment, open_repo
from soda.repo.workspace import land_on_base, merge_into_milestone
from soda.store import open_db
from soda.tools import Sandbox, read_only_tools
from tests.conftest import git

HOOKS = [
    "pre-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "reference-transaction",
    "post-index-change",
    "post-checkout",
    "pre-merge-commit",
    "post-merge",
]
PLANTS = [*HOOKS, "core.fsmonitor", "core.hooksPath"]


@pytest.fixture
def unhardened(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No hardening in the environment at the start (as in a fresh soda process);
    whatever the test adds is undone afterwards."""
    monkeypatch.setenv(CONFIG_PARAMETERS, "")  # recorded, so teardown restores the original
    monkeypatch.delenv(CONFIG_PARAMETERS)
    yield


def plant(repo: Path, kind: str, tmp_path: Path) -> Path:
    """Install the program `kind` names; return the marker file it would create."""
    marker = tmp_path / "fired"
    script = f"#!/bin/sh\necho \"$0 $*\" >> '{marker}'\ncat >/dev/null 2>&1 || true\nexit 0\n"

    def write(path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(script)
        path.chmod(0o755)

    if kind == "core.fsmonitor":
        write(tmp_path / "fsmonitor.sh")
        git(repo, "config", "core.fsmonitor", str(tmp_path / "fsmonitor.sh"))
    elif kind == "core.hooksPath":
        for hook in HOOKS:
            write(tmp_path / "evil-hooks" / hook)
        git(repo, "config", "core.hooksPath", str(tmp_path / "evil-hooks"))
    else:
        write(repo / ".git" / "hooks" / kind)
    return marker


def drive_soda(path: Path, tmp_path: Path) -> None:
    """The git work of an iteration, through soda's own code: a commit, two
    workspaces, a real catch-up merge, both merges, the agents' git tools, SENSE's
    queries, clean-up, and landing on the base branch."""
    repo = open_repo(path)
    (path / "a.txt").write_text("a\n")
    commit_all(repo, "a")
    repo.git.branch("soda/spec", "main")
    pool = Checkouts(repo, tmp_path / "worktrees")
    first = pool.work("soda/spec", "soda-work/spec/iter-1")
    second = pool.work("soda/spec", "soda-work/spec/iter-2")
    (first.path / "b.txt").write_text("b\n")
    assert first.commit_all("b\n\nSoda-Task: 1")
    (second.path / "c.txt").write_text("c\n")
    assert second.commit_all("c\n\nSoda-Task: 2")
    merge_into_milestone(first, "soda: b\n\nSoda-Iteration: 1\n")
    assert second.catch_up()  # the milestone moved: a real merge commit in the worktree
    tools = read_only_tools(Sandbox(second.path))
    for name, args in [
        ("git_log", {"max_count": None, "path": None}),
        ("git_show", {"rev": "HEAD"}),
        ("git_diff", {"rev_range": None, "path": None}),
    ]:
        assert not tools.call(name, args).is_error
    merge_into_milestone(second, "soda: c\n\nSoda-Iteration: 2\n")
    db = open_db(tmp_path / "soda.db")
    base = git(path, "rev-parse", "main")
    claims = code_claims(SenseInput(path, "soda/spec", base, "spec", 1, 1, 1, Config(), db))
    assert claims.commits_total >= 3
    for ws in (first, second):
        pool.release(ws)
    pool.remove_all()
    assert land_on_base(repo, "soda/spec", "main").startswith("fast-forwarded")


@pytest.mark.parametrize("kind", PLANTS)
def test_soda_git_operations_run_no_planted_program(
    repo: Path, tmp_path: Path, kind: str, unhardened: None
) -> None:
    marker = plant(repo, kind, tmp_path)
    drive_soda(repo, tmp_path)
    assert git(repo, "rev-parse", "main") == git(repo, "rev-parse", "soda/spec")
    assert not marker.exists(), marker.read_text()


@pytest.mark.parametrize("kind", PLANTS)
def test_control_each_plant_fires_for_a_plain_git(repo: Path, tmp_path: Path, kind: str) -> None:
    marker = plant(repo, kind, tmp_path)
    env = {k: v for k, v in os.environ.items() if k != CONFIG_PARAMETERS}

    def plain(cwd: Path, *args: str) -> None:
        subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)

    (repo / "a.txt").write_text("a\n")
    plain(repo, "add", "-A")
    plain(repo, "commit", "-q", "-m", "a")
    plain(repo, "status")
    plain(repo, "worktree", "add", "-q", "-b", "side", str(tmp_path / "side"))
    (tmp_path / "side" / "b.txt").write_text("b\n")
    plain(tmp_path / "side", "add", "-A")
    plain(tmp_path / "side", "commit", "-q", "-m", "b")
    (repo / "c.txt").write_text("c\n")
    plain(repo, "add", "-A")
    plain(repo, "commit", "-q", "-m", "c")
    plain(repo, "merge", "--no-edit", "-q", "side")
    assert marker.exists()


@pytest.mark.parametrize("kind", PLANTS)
def test_explicit_argv_calls_carry_the_hardening_without_the_environment(
    repo: Path, tmp_path: Path, kind: str, unhardened: None
) -> None:
    """Workspace commits and merges pass the options as `-c`, so they are safe even
    in a process that never hardened its environment (a Repo not from open_repo)."""
    git(repo, "branch", "soda/spec", "main")  # the tests' own git: before the plant
    marker = plant(repo, kind, tmp_path)
    raw = Repo(repo)
    pool = Checkouts(raw, tmp_path / "worktrees")
    ws = pool.work("soda/spec", "soda-work/spec/iter-1")
    (ws.path / "b.txt").write_text("b\n")
    assert ws.commit_all("b")
    merge_into_milestone(ws, "soda: b\n\nSoda-Iteration: 1\n")
    pool.release(ws)
    pool.remove_all()
    assert CONFIG_PARAMETERS not in os.environ
    assert not marker.exists(), marker.read_text()


def test_hardening_appends_keeps_existing_entries_and_is_idempotent() -> None:
    env = {CONFIG_PARAMETERS: "'user.name'='x' 'core.hooksPath=/tmp/evil'"}
    harden_git_environment(env)
    once = env[CONFIG_PARAMETERS]
    assert once.startswith("'user.name'='x' 'core.hooksPath=/tmp/evil' ")
    assert "'core.hooksPath=/dev/null'" in once  # after the entry it overrides
    harden_git_environment(env)
    assert env[CONFIG_PARAMETERS] == once
    env[CONFIG_PARAMETERS] = once + " 'core.fsmonitor=/tmp/evil'"  # a later entry undoes ours
    harden_git_environment(env)
    assert env[CONFIG_PARAMETERS].endswith("'core.fsmonitor=/tmp/evil' 'core.fsmonitor=false'")


def test_git_reads_the_hardened_values_over_repository_config(
    repo: Path, tmp_path: Path, unhardened: None
) -> None:
    git(repo, "config", "core.hooksPath", str(tmp_path))
    git(repo, "config", "core.fsmonitor", str(tmp_path / "x"))
    open_repo(repo)
    assert git(repo, "config", "core.hooksPath") == "/dev/null"
    assert git(repo, "config", "core.fsmonitor") == "false"
