"""Pushing the milestone branch, and the repository's name read from the remote.

The push itself is soda.repo.push's (the fleet's too): the token reaches git
for that one command only, through a credential helper, and is never written
anywhere. Here its failures get the forge's words: which variable holds the
token, and what to do about a remote branch soda may not overwrite.
"""

from __future__ import annotations

import re
from pathlib import Path

from soda.errors import CredentialsError, TransientError, UserError
from soda.repo.git import HARDENING_ARGS
from soda.repo.push import PUSH_TIMEOUT, PushRefused, PushRejected
from soda.repo.push import push as push_refs
from soda.system import proc

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
    """Push `branch` to the same name on `remote` (fast-forward only, tried once:
    soda.repo.push); `token_env` names the token's variable in messages."""
    ref = f"refs/heads/{branch}"
    try:
        push_refs(repo_path, remote, [f"{ref}:{ref}"], token=token, timeout=timeout)
    except PushRejected as exc:
        raise UserError(
            f"forge: {remote}/{branch} has commits the milestone lacks; soda pushes"
            f" fast-forward only: merge or delete the remote branch ({exc.detail})"
        ) from exc
    except PushRefused as exc:
        raise CredentialsError(
            f"forge: pushing to {remote} was refused: the token in ${token_env} needs"
            f" read and write access to the repository's contents ({exc.detail})"
        ) from exc
    except TransientError as exc:
        raise TransientError(f"forge: {exc}") from exc
