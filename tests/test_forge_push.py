"""The push: over a token-guarded smart-HTTP remote (`git http-backend`,
tests/fakegithttp.py) the token reaches git through the credential helper for
that one command and is written nowhere; a wrong one is a user error naming its
variable; a remote branch with commits soda lacks is never forced."""

from __future__ import annotations

from pathlib import Path

import pytest

from soda.config import Config, ForgeConfig
from soda.errors import CredentialsError, UserError
from soda.events import Events
from soda.forge import PullRequests, connect
from soda.store import open_db
from tests.conftest import git
from tests.fakeforge import NAME, OWNER, TOKEN, FakeForge
from tests.fakegithttp import GitHttp
from tests.test_forge import BRANCH, NoWait, commit, setup

pytest_plugins = ("tests.fakeforge", "tests.fakegithttp")


def over_http(repo: Path, remote: GitHttp) -> tuple[Events, Path]:
    """`repo` with origin at the HTTP remote (main already there), its milestone
    branch one commit ahead."""
    bare = remote.root / "widgets.git"
    git(remote.root, "init", "-q", "--bare", "-b", "main", str(bare))
    git(repo, "push", "-q", str(bare), "main")  # the set-up's own push: no HTTP
    git(repo, "remote", "add", "origin", remote.url("widgets.git"))
    git(repo, "branch", BRANCH, "main")
    commit(repo, "a.txt", "one")
    return Events(open_db(repo / "state.db"), repo / "events.jsonl"), bare


def connected(
    repo: Path, forge: FakeForge, monkeypatch: pytest.MonkeyPatch, token: str
) -> PullRequests:
    monkeypatch.setenv("GITHUB_TOKEN", token)
    settings = ForgeConfig(mode="draft", api_url=forge.url, repository=f"{OWNER}/{NAME}")
    pulls = connect(Config(forge=settings, root=repo), open_db(repo / "state.db"), BRANCH, NoWait())
    assert pulls is not None
    return pulls


def test_the_token_goes_to_git_for_the_push_and_nowhere_else(
    repo: Path, fake_forge: FakeForge, git_http: GitHttp, monkeypatch: pytest.MonkeyPatch
) -> None:
    events, bare = over_http(repo, git_http)
    pulls = connected(repo, fake_forge, monkeypatch, TOKEN)
    tip = git(repo, "rev-parse", BRANCH)
    pull = pulls.publish(tip, "t", "b", events)
    assert pull is not None and pull.number == 1
    assert git(bare, "rev-parse", BRANCH) == tip  # pushed over HTTP
    assert git_http.authorizations and all(
        git_http.allowed(header) for header in git_http.authorizations
    )  # git asked its helper, and the helper gave the token
    for path in [*(repo / ".git").rglob("*"), *repo.glob("state.db*"), repo / "events.jsonl"]:
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path
    assert "credential" not in git(repo, "config", "--list")


def test_a_wrong_token_is_refused_naming_its_variable(
    repo: Path, fake_forge: FakeForge, git_http: GitHttp, monkeypatch: pytest.MonkeyPatch
) -> None:
    events, bare = over_http(repo, git_http)
    wrong = "ghp_wrong_but_well_formed_0123456789"
    pulls = connected(repo, fake_forge, monkeypatch, wrong)
    with pytest.raises(CredentialsError, match=r"the token in \$GITHUB_TOKEN needs") as refused:
        pulls.publish(git(repo, "rev-parse", BRANCH), "t", "b", events)
    assert wrong not in str(refused.value)
    assert git_http.authorizations  # it was tried, and refused
    assert not git(bare, "branch", "--list", BRANCH)
    assert fake_forge.pulls == {}


def test_a_diverged_remote_branch_is_a_user_error(
    repo: Path, fake_forge: FakeForge, monkeypatch: pytest.MonkeyPatch
) -> None:
    pulls, events = setup(repo, fake_forge, monkeypatch)
    other = repo.parent / "other"
    git(repo.parent, "clone", "-q", str(fake_forge.bare), str(other))
    git(other, "checkout", "-q", "-b", BRANCH)
    (other / "theirs.txt").write_text("someone else's")
    git(other, "add", "theirs.txt")
    git(other, "commit", "-q", "-m", "theirs")
    git(other, "push", "-q", "origin", BRANCH)
    with pytest.raises(UserError, match=f"origin/{BRANCH} has commits the milestone lacks"):
        pulls.publish(git(repo, "rev-parse", BRANCH), "t", "b", events)
    assert fake_forge.pulls == {}
    assert git(fake_forge.bare, "log", "-1", "--format=%s", BRANCH) == "theirs"  # not forced
