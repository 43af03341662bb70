"""soda.system.proc: real subprocesses, real timeouts, real process groups."""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path

import pytest

from soda.errors import InputError
from soda.system.proc import KILL_GRACE_S, command_words, run, scrubbed_env


def sleep_token() -> str:
    """A sleep duration no other process on the machine uses, to find ours in /proc."""
    return f"37.{uuid.uuid4().int % 10**6:06d}"


def live_processes_with(token: str, wait_s: float = 1.0) -> list[str]:
    """Command lines of running (non-zombie) processes mentioning `token`, after
    giving killed ones up to `wait_s` to disappear."""
    deadline = time.monotonic() + wait_s
    while True:
        alive = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue  # exited while we looked
            if token in cmdline and state != "Z":
                alive.append(cmdline)
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def test_non_zero_exit_is_data_with_stdout_and_stderr_merged(tmp_path: Path) -> None:
    result = run("echo out; echo err >&2; exit 3", cwd=tmp_path, timeout=10)
    assert result.returncode == 3
    assert result.output == "out\nerr\n"
    assert not result.timed_out
    assert not result.ok


def test_list_command_runs_without_a_shell_in_cwd(tmp_path: Path) -> None:
    result = run(["sh", "-c", 'printf "%s|" "$1" "$(pwd)"', "x", "a b; $HOME"], tmp_path, 10)
    assert result.output == f"a b; $HOME|{tmp_path.resolve()}|"
    assert result.command == 'sh -c \'printf "%s|" "$1" "$(pwd)"\' x \'a b; $HOME\''
    assert result.ok


def test_timeout_kills_the_whole_group_including_grandchildren(tmp_path: Path) -> None:
    token = sleep_token()
    started = time.monotonic()
    result = run(f"sh -c 'sleep {token} & sleep {token}'", tmp_path, timeout=1)
    assert time.monotonic() - started < 5
    assert result.timed_out
    assert result.returncode is None
    # Members that died on SIGTERM end the wait; unreaped zombies must not stretch it.
    assert result.duration_s < 1 + KILL_GRACE_S - 0.5
    assert live_processes_with(token) == []


def test_timeout_escalates_to_sigkill_when_sigterm_is_ignored(tmp_path: Path) -> None:
    token = sleep_token()
    started = time.monotonic()
    result = run(f"trap '' TERM; sleep {token}; sleep {token}", tmp_path, timeout=0.5)
    assert result.timed_out
    assert time.monotonic() - started < 5
    assert live_processes_with(token) == []


def test_timeout_lets_every_group_member_handle_sigterm(tmp_path: Path) -> None:
    # The grandchild cleans up on SIGTERM; it only gets to if the whole group is
    # signalled and given its grace, not just the leader.
    inner = "trap 'echo cleaned > marker; exit 0' TERM; while :; do sleep 0.05; done"
    result = run(["sh", "-c", f'sh -c "{inner}" & wait'], tmp_path, timeout=0.5)
    assert result.timed_out
    assert (tmp_path / "marker").read_text() == "cleaned\n"


def test_background_jobs_do_not_outlive_a_finished_command(tmp_path: Path) -> None:
    token = sleep_token()
    result = run(f"sleep {token} >/dev/null 2>&1 & echo started", tmp_path, timeout=10)
    assert result.output == "started\n"
    assert result.returncode == 0
    assert live_processes_with(token) == []


def test_output_keeps_head_and_tail_and_says_how_much_was_cut(tmp_path: Path) -> None:
    script = "import sys; sys.stdout.write('H' * 60 + 'x' * 10000 + 'T' * 60)"
    result = run([sys.executable, "-c", script], tmp_path, 10, output_limit=100)
    head, marker, tail = result.output.split("\n")
    assert head == "H" * 50
    assert marker == "[... 10020 characters cut ...]"
    assert tail == "T" * 50


def test_huge_output_is_counted_exactly_while_memory_stays_bounded(tmp_path: Path) -> None:
    result = run("yes abcd | head -c 5000000; printf END", tmp_path, 20, output_limit=1000)
    assert result.output.startswith("abcd\n" * 100)
    assert result.output.endswith("abcd\nEND")
    assert "[... 4999003 characters cut ...]" in result.output


def test_output_at_the_limit_is_untouched(tmp_path: Path) -> None:
    result = run("printf 0123456789", tmp_path, 10, output_limit=10)
    assert result.output == "0123456789"


def test_undecodable_bytes_are_replaced_not_fatal(tmp_path: Path) -> None:
    result = run(r"printf 'ok\377end'", tmp_path, 10)
    assert result.output == "ok\ufffdend"


def test_stdin_is_empty_even_when_ours_is_not(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.write(write_end, b"leaked\n")
    os.close(write_end)
    saved = os.dup(0)
    os.dup2(read_end, 0)  # our own stdin now has a line waiting
    try:
        result = run('read line; echo "[$line] $?"', tmp_path, timeout=5)
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(read_end)
    assert result.output == "[] 1\n"


def test_missing_cwd_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a directory"):
        run("true", tmp_path / "nope", 5)


def test_missing_program_reads_like_a_shell_failure(tmp_path: Path) -> None:
    result = run(["soda-no-such-program-xyz"], tmp_path, 5)
    assert result.returncode == 127
    assert "soda-no-such-program-xyz" in result.output


def test_child_does_not_see_secrets_or_parent_pytest_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FOO_API_KEY", "sk-leak-1")
    monkeypatch.setenv("GITHUB_REPOSITORY_X", "leak-2")
    monkeypatch.setenv("my_password", "leak-3")
    monkeypatch.setenv("PYTEST_ADDOPTS", "-x")
    monkeypatch.setenv("SODA_HARMLESS", "visible")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "someone")
    output = run("env", tmp_path, 10).output
    assert "leak" not in output
    assert "PYTEST_ADDOPTS" not in output
    assert "SODA_HARMLESS=visible" in output
    assert "GIT_AUTHOR_NAME=someone" in output
    assert f"PATH={os.environ['PATH']}" in output


def test_extra_env_is_added_and_explicit_env_replaces_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SODA_INHERITED", "1")
    extra = run("env", tmp_path, 10, extra_env={"PYTEST_ADDOPTS": "--junit-xml=x"}).output
    assert "PYTEST_ADDOPTS=--junit-xml=x" in extra
    assert "SODA_INHERITED=1" in extra
    explicit = run("env", tmp_path, 10, env={"ONLY": "this"}, extra_env={"AND": "that"}).output
    assert "SODA_INHERITED" not in explicit
    assert "ONLY=this" in explicit
    assert "AND=that" in explicit


@pytest.mark.parametrize(
    "name",
    [
        "FOO_API_KEY",
        "apikey",
        "SLACK_TOKEN",
        "CLIENT_SECRET",
        "DB_PASSWORD",
        "FTP_PASSWD",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "NPM_AUTH",
        "ANTHROPIC_BASE_URL",
        "openai_org",
        "AWS_REGION",
        "GH_HOST",
        "GITHUB_ACTIONS",
        "PYTEST_CURRENT_TEST",
    ],
)
def test_scrubbed_env_removes(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(name, "x")
    assert name not in scrubbed_env()


@pytest.mark.parametrize(
    "name", ["PATH", "HOME", "LANG", "GIT_AUTHOR_EMAIL", "MY_GH_MIRROR", "VIRTUAL_ENV"]
)
def test_scrubbed_env_keeps(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(name, "x")
    assert scrubbed_env()[name] == "x"


def test_scrubbed_env_extra_wins() -> None:
    assert scrubbed_env({"MY_TOKEN": "given on purpose"})["MY_TOKEN"] == "given on purpose"


def test_command_words_skip_leading_assignments() -> None:
    assert command_words("A=1 B='x y' /usr/bin/python -m pytest -q") == [
        "/usr/bin/python",
        "-m",
        "pytest",
        "-q",
    ]
    assert command_words("pytest X=1") == ["pytest", "X=1"]
    assert command_words("A=1") == []
    assert command_words("echo 'unbalanced") == []
