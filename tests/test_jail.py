"""soda.system.jail.Jail.run, directly, on a real repository with a real worktree: what a
jailed command sees (the worktree at the repository's path, git read-only, the
person's environment directories, no state, no home, no credentials, no network)
and that nothing it starts outlives it. `mode = "none"` is the control: the same
probes run unconfined and see everything the jail hides."""

from __future__ import annotations

import dataclasses
import os
import socket
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from soda.config import Config, SandboxConfig
from soda.errors import UserError
from soda.system.jail import JAIL_GIT, Jail, JailUnavailable, _probe
from tests.conftest import git

TIMEOUT = 30.0


@dataclass(frozen=True)
class Setup:
    """A person's checkout with soda's state and a worktree inside it."""

    root: Path
    worktree: Path

    def jail(self, **sandbox: object) -> Jail:
        return Jail.for_config(Config(root=self.root, sandbox=SandboxConfig(**sandbox)))


@pytest.fixture
def setup(repo: Path) -> Setup:
    root = Path(os.path.realpath(repo))
    (root / ".gitignore").write_text(".venv/\nstate/\n")
    git(root, "add", ".gitignore")
    git(root, "commit", "-q", "-m", "ignore the environment and soda's state")
    (root / ".venv").mkdir()
    (root / ".venv" / "marker.txt").write_text("the person's venv\n")
    (root / "state").mkdir()
    (root / "state" / "soda.db").write_text("not for agents\n")
    (root / "checkout_only.txt").write_text("the person's uncommitted work\n")
    worktree = root / "state" / "worktrees" / "view"
    git(root, "worktree", "add", "-q", "--detach", str(worktree), "HEAD")
    (worktree / "worktree_only.txt").write_text("the task's work\n")
    return Setup(root, worktree)


def run(jail: Jail, setup: Setup, command: str, timeout: float = TIMEOUT) -> tuple[int | None, str]:
    result = jail.run(command, setup.worktree, timeout=timeout)
    return result.returncode, result.output


def snapshot(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()
    }


# --- the filesystem ---------------------------------------------------------------


def test_the_worktree_appears_at_the_repository_path(setup: Setup) -> None:
    jail = setup.jail()
    assert run(jail, setup, "pwd") == (0, f"{setup.root}\n")
    assert run(jail, setup, "cat worktree_only.txt") == (0, "the task's work\n")
    assert run(jail, setup, f"cat {setup.root}/worktree_only.txt")[0] == 0
    code, output = run(jail, setup, f"cat {setup.root}/checkout_only.txt")
    assert code != 0 and "No such file" in output
    # Writes land in the worktree, not in the person's checkout.
    assert run(jail, setup, "echo new > made_in_jail.txt")[0] == 0
    assert (setup.worktree / "made_in_jail.txt").read_text() == "new\n"
    assert not (setup.root / "made_in_jail.txt").exists()


def test_git_reads_work_and_writes_fail(setup: Setup) -> None:
    jail = setup.jail()
    real_git = snapshot(setup.root / ".git")
    pointer = (setup.worktree / ".git").read_text()
    head = git(setup.root, "rev-parse", "HEAD")
    assert run(jail, setup, "git log -1 --format=%H") == (0, f"{head}\n")
    code, status = run(jail, setup, "git status --porcelain")
    assert code == 0 and status == "?? worktree_only.txt\n"
    for write in (
        "git commit -q --allow-empty -m planted",
        "git branch planted",
        "git update-ref refs/heads/planted HEAD",
        "git config core.hooksPath /tmp",
        f"touch {JAIL_GIT}/planted",
        "echo 'gitdir: /tmp/elsewhere' > .git",
    ):
        code, output = run(jail, setup, write)
        assert code != 0, f"{write!r} succeeded in the jail: {output}"
    assert snapshot(setup.root / ".git") == real_git
    assert (setup.worktree / ".git").read_text() == pointer
    assert "planted" not in git(setup.root, "branch", "--list")


def test_a_token_in_a_remote_url_does_not_reach_the_jail(setup: Setup) -> None:
    url = "https://soda-user:ghp_SECRETTOKEN@example.invalid/project.git"
    git(setup.root, "remote", "add", "origin", url)
    fetch_head = setup.root / ".git" / "FETCH_HEAD"
    fetch_head.write_text(f"0000\t\tbranch 'main' of {url}\n")
    code, output = run(
        setup.jail(),
        setup,
        f"git remote -v; cat {JAIL_GIT}/config {JAIL_GIT}/FETCH_HEAD; git log --oneline -1",
    )
    assert code == 0, output
    assert "SECRETTOKEN" not in output
    assert "https://example.invalid/project.git" in output  # the remote itself stays
    assert "ghp_SECRETTOKEN" in (setup.root / ".git" / "config").read_text()  # untouched


def test_the_ignored_venv_is_visible_read_only(setup: Setup) -> None:
    jail = setup.jail()
    _, output = run(
        jail,
        setup,
        f"cat {setup.root}/.venv/marker.txt; touch .venv/planted || echo touch refused; "
        "(echo changed > .venv/marker.txt) 2>/dev/null || echo write refused",
    )
    assert output.startswith("the person's venv\n")
    assert "Read-only file system" in output
    assert output.endswith("touch refused\nwrite refused\n")
    assert sorted(os.listdir(setup.root / ".venv")) == ["marker.txt"]
    assert (setup.root / ".venv" / "marker.txt").read_text() == "the person's venv\n"


def test_the_ignored_venv_stays_visible_on_every_run(setup: Setup) -> None:
    jail = setup.jail()
    for _ in range(2):
        assert run(jail, setup, "cat .venv/marker.txt") == (0, "the person's venv\n")
    assert not (setup.worktree / ".venv").exists()


def test_the_state_directory_is_not_visible(setup: Setup) -> None:
    jail = setup.jail()
    for probe in (
        "ls state",
        f"test -e {setup.root}/state/soda.db",
        f"ls {setup.root}/state/worktrees",
    ):
        assert run(jail, setup, probe)[0] != 0, probe


def test_home_is_empty_but_for_exposed_toolchains(setup: Setup) -> None:
    home = Path.home()
    bare = dataclasses.replace(setup.jail(), expose=())
    assert run(bare, setup, 'echo "$HOME"; ls -A "$HOME"') == (0, f"{home}\n")
    # The configured jail binds toolchains that live under the home (pyenv, a
    # venv's base interpreter) back, read-only; nothing else of the home shows.
    jail = setup.jail()
    allowed = {p.relative_to(home).parts[0] for p in jail.expose if p.is_relative_to(home)}
    code, listing = run(jail, setup, 'ls -A "$HOME"')
    assert code == 0 and set(listing.split()) <= allowed
    for entry in set(os.listdir(home)) - allowed:
        assert run(jail, setup, f"test -e {home / entry}")[0] != 0, entry


# --- the environment --------------------------------------------------------------

CREDENTIALS = {
    "ANTHROPIC_API_KEY": "sk-ant-canary-1",
    "DATABASE_URL": "postgres://user:canary-2@db/prod",
    "AWS_SECRET_ACCESS_KEY": "canary-3",
    "GITHUB_TOKEN": "canary-4",
}


def test_no_credential_reaches_the_jail(setup: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    code, output = run(
        setup.jail(),
        setup,
        "env; for f in /proc/1/environ /proc/self/environ; do tr '\\0' '\\n' < $f; done",
    )
    assert code == 0 and output.count("GIT_OPTIONAL_LOCKS=0") == 3  # all three were read
    for value in CREDENTIALS.values():
        assert value not in output


def test_env_passthrough_passes_only_the_named_variable(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SODA_TEST_FLAVOUR", "vanilla")
    monkeypatch.setenv("SODA_TEST_OTHER", "chocolate")
    jail = setup.jail(env_passthrough=["SODA_TEST_FLAVOUR"])
    code, output = run(jail, setup, "env")
    assert code == 0
    assert "SODA_TEST_FLAVOUR=vanilla\n" in output
    assert "chocolate" not in output
    assert "vanilla" not in run(setup.jail(), setup, "env")[1]


# --- the network --------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[socket.socket]:
    """A listening TCP socket on the host's loopback."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.setblocking(False)
        yield listener


def connect_command(port: int) -> str:
    code = (
        "import socket; s = socket.socket(); s.settimeout(5); "
        f"s.connect(('127.0.0.1', {port})); print('connected')"
    )
    return f'{sys.executable} -c "{code}"'


def accepted(listener: socket.socket) -> bool:
    """Whether a connection is waiting. A connect() that returned has completed
    its handshake in the kernel, so no waiting is needed to see it."""
    try:
        conn, _ = listener.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


def test_network_is_off_by_default(setup: Setup, server: socket.socket) -> None:
    code, output = run(setup.jail(), setup, connect_command(server.getsockname()[1]))
    # Its own network namespace: 127.0.0.1 is the jail's own loopback, where
    # nothing listens.
    assert code != 0 and "Connection refused" in output
    assert not accepted(server)


def test_network_on_shares_the_host_network(setup: Setup, server: socket.socket) -> None:
    # --share-net keeps the host's network namespace: the host's loopback too.
    jail = setup.jail(network=True)
    assert run(jail, setup, connect_command(server.getsockname()[1])) == (0, "connected\n")
    assert accepted(server)


# --- processes ----------------------------------------------------------------------


def marker() -> str:
    """A unique `sleep` argument to find the process by."""
    return f"3600.{uuid.uuid4().int % 10**12}"


def processes(mark: str) -> list[int]:
    """Live (not zombie) processes whose command line holds `mark`."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cmdline = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if mark in cmdline and state not in ("Z", "X") and int(entry.name) != os.getpid():
            found.append(int(entry.name))
    return found


def session_leader(mark: str) -> str:
    """A command that starts `sleep mark` in a session of its own (out of the
    command's process group) and returns once it is running there."""
    flag = f"leader-{mark}"
    return (
        f"setsid sh -c 'echo started > {flag}; exec sleep {mark}' >/dev/null 2>&1 & "
        f"until [ -s {flag} ]; do sleep 0.01; done; echo alive"
    )


def gone(mark: str, deadline_s: float = 5.0) -> bool:
    deadline = time.monotonic() + deadline_s
    while processes(mark):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_a_background_session_leader_dies_with_the_command(setup: Setup) -> None:
    mark = marker()
    assert run(setup.jail(), setup, session_leader(mark)) == (0, "alive\n")
    assert gone(mark, deadline_s=1.0)


def test_a_timeout_kills_the_whole_tree(setup: Setup) -> None:
    mark = marker()
    result = setup.jail().run(
        f"setsid sleep {mark} & sleep {mark} & sleep {mark}", setup.worktree, timeout=1.0
    )
    assert result.timed_out and result.returncode is None
    assert result.duration_s < 10
    assert gone(mark, deadline_s=1.0)


# --- the control --------------------------------------------------------------------


def test_mode_none_runs_unconfined(setup: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same probes without the jail see what the jail hides: the tests above
    would fail if the jail did nothing."""
    monkeypatch.setenv("DATABASE_URL", CREDENTIALS["DATABASE_URL"])
    none = setup.jail(mode="none")
    assert run(none, setup, "pwd") == (0, f"{setup.worktree}\n")
    assert run(none, setup, f"cat {setup.root}/checkout_only.txt")[0] == 0
    assert run(none, setup, f"test -e {setup.root}/state/soda.db")[0] == 0
    # Only names that look like credentials are scrubbed without the jail.
    assert CREDENTIALS["DATABASE_URL"] in run(none, setup, "env")[1]
    mark = marker()
    assert run(none, setup, session_leader(mark)) == (0, "alive\n")
    escaped = processes(mark)
    try:
        assert escaped, "the session leader should survive without the jail"
    finally:
        for pid in escaped:
            os.kill(pid, 9)
    assert gone(mark)


# --- availability -------------------------------------------------------------------


def test_the_jail_is_available_here(setup: Setup) -> None:
    setup.jail().ensure_available()
    assert "network off" in setup.jail().describe()
    assert setup.jail(mode="none").describe().startswith('sandbox.mode = "none"')
    assert issubclass(JailUnavailable, UserError)


def fake_bwrap(tmp_path: Path, body: str) -> str:
    script = tmp_path / f"bwrap-{uuid.uuid4().hex}"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return str(script)


def test_probe_returns_the_last_line_bwrap_printed(tmp_path: Path) -> None:
    binary = fake_bwrap(
        tmp_path,
        "echo 'bwrap: setting up' >&2\n"
        "echo 'bwrap: No permissions to create new namespace' >&2\nexit 1",
    )
    assert _probe(binary) == "bwrap: No permissions to create new namespace"


def test_probe_names_the_exit_code_when_bwrap_is_silent(tmp_path: Path) -> None:
    assert _probe(fake_bwrap(tmp_path, "exit 3")) == "exit code 3"


def test_probe_of_a_missing_binary_says_so(tmp_path: Path) -> None:
    reason = _probe(str(tmp_path / "no-such-bwrap"))
    assert reason is not None and "No such file" in reason


def test_probe_of_a_working_binary_is_none(tmp_path: Path) -> None:
    assert _probe(fake_bwrap(tmp_path, "exit 0")) is None
