"""Pushing the milestone branch, and the repository's name read from the remote.

The token reaches git for one command only: a credential helper given as a `-c`
option reads it from the environment of that one git process
(`SODA_FORGE_TOKEN`), so it is never in `.git/config`, the reflog, the command
line, a log line or the database. Over a transport that asks for no credentials
(ssh, a local path) the helper is never called.
"""

from __future__ import annotations

import re
from pathlib import Path

from soda.errors import CredentialsError, TransientError, UserError
from soda.repo.git import HARDENING_ARGS
from soda.system import proc

PUSH_TIMEOUT = 300.0
TOKEN_VARIABLE = "SODA_FORGE_TOKEN"
_HELPER = (
    'credential.helper=!f() { test "$1" = get || exit 0;'
    f' echo username=x-access-token; echo "password=${TOKEN_VARIABLE}"; }}; f'
)

_URL = re.compile(
    r"^(?:https?://[^/]+/|ssh://(?:[^@/]+@)?[^/]+/|[^@/:]+@[^:]+:)"
    r"(?P<name>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+?)(?:\.git)?/?$"
)


def remote_url(repo_path: Path, remote: str) -> str:
    result = proc.run(
        ["git", *HARDENING_ARGS, "remote", "get-url", remote],
        repo_path,
        timeout=30,
        interruptible=False,
    )
    if not result.ok:
        raise UserError(f"soda.toml: forge.remote: git has no remote {remote!r} in {repo_path}")
    return result.output.strip()


def repository_from_url(url: str) -> str | None:
    """ "owner/name" from a remote URL (https, ssh, scp-like), or None."""
    match = _URL.match(url.strip())
    return match.group("name") if match else None


def push(
    repo_path: Path,
    remote: str,
    branch: str,
    token: str,
    token_env: str,
    timeout: float = PUSH_TIMEOUT,
) -> None:
    """Push `branch` to the same name on `remote` (fast-forward only); `token_env`
    names the token's variable in messages."""
    ref = f"refs/heads/{branch}"
    argv = [
        "git",
        *HARDENING_ARGS,
        "-c",
        "credential.helper=",  # only ours: no helper of the person's stores the token
        "-c",
        _HELPER,
        "push",
        "--porcelain",
        remote,
        f"{ref}:{ref}",
    ]
    result = proc.run(
        argv,
        repo_path,
        timeout=timeout,
        extra_env={TOKEN_VARIABLE: token, "GIT_TERMINAL_PROMPT": "0"},
        interruptible=False,
    )
    if result.ok:
        return
    output = scrub(result.output, token)
    first = next((line for line in output.splitlines() if line.strip()), "no output")
    if "[rejected]" in output or "non-fast-forward" in output or "fetch first" in output:
        raise UserError(
            f"forge: {remote}/{branch} has commits the milestone lacks; soda pushes"
            f" fast-forward only: merge or delete the remote branch ({first.strip()})"
        )
    if re.search(r"Authentication failed|403|401|could not read Username", output):
        raise CredentialsError(
            f"forge: pushing to {remote} was refused: the token in ${token_env} needs"
            f" read and write access to the repository's contents ({first.strip()})"
        )
    if result.timed_out:
        raise TransientError(f"forge: pushing {branch} to {remote} timed out")
    raise TransientError(f"forge: pushing {branch} to {remote} failed: {first.strip()[:300]}")


def scrub(text: str, token: str) -> str:
    """`text` without the token (a remote that echoes it must not leak it)."""
    return text.replace(token, "***") if token else text
