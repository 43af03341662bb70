"""Pushing to a remote: one `git push`, tried again when its failure may pass.

Both pushes of soda come here: the forge's (the milestone branch for its pull
request, with the forge's token, tried once) and the fleet's (the milestone
after each merge, and the iteration's report with it, retried with backoff).
Each caller says how often to try (`Retry`); a push the remote rejects
(fast-forward only: nothing is ever forced but what a `+` refspec names) or
whose credentials it refuses is never tried again.

The token reaches git for one command only: a credential helper given as a `-c`
option reads it from the environment of that one git process
(`SODA_FORGE_TOKEN`), so it is never in `.git/config`, the reflog, the command
line, a log line or the database. Over a transport that asks for no credentials
(ssh, a local path) the helper is never called.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
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
_REJECTED = re.compile(r"\[rejected\]|non-fast-forward|fetch first")
_REFUSED = re.compile(r"Authentication failed|403|401|could not read Username")


@dataclass(frozen=True)
class Retry:
    """How often a push whose failure may pass is tried, and how long between."""

    attempts: int = 1
    wait: float = 0.5
    """Seconds before the second attempt; doubled before each next one."""


ONCE = Retry()


class PushRejected(UserError):
    """The remote has commits a pushed branch lacks (or refused the update)."""

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(message)
        self.detail = detail
        """git's first line about it (the token scrubbed)."""


class PushRefused(CredentialsError):
    """The remote refused the credentials the push offered."""

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(message)
        self.detail = detail


def push(
    repo_path: Path,
    remote: str,
    refspecs: Sequence[str],
    *,
    token: str | None = None,
    atomic: bool = False,
    retry: Retry = ONCE,
    timeout: float = PUSH_TIMEOUT,
    env: Mapping[str, str] | None = None,
    say: Callable[[str], None] | None = None,
) -> None:
    """Push `refspecs` to `remote`, all or none when `atomic`. `token`: offered
    by a credential helper to this one git process. `env`: the git process's
    environment (default: soda.system.proc's, credentials scrubbed).

    Raises PushRejected, PushRefused, or TransientError once `retry` is spent."""
    wait = retry.wait
    for attempt in range(1, max(1, retry.attempts) + 1):
        try:
            _push_once(repo_path, remote, refspecs, token, atomic, timeout, env)
            return
        except TransientError as exc:
            if attempt >= retry.attempts:
                raise
            if say is not None:
                say(f"{exc}; again in {wait:g} s")
            time.sleep(wait)
            wait *= 2


def _push_once(
    repo_path: Path,
    remote: str,
    refspecs: Sequence[str],
    token: str | None,
    atomic: bool,
    timeout: float,
    env: Mapping[str, str] | None,
) -> None:
    argv = ["git", *HARDENING_ARGS]
    extra = {"GIT_TERMINAL_PROMPT": "0"}
    if token:
        # Only ours: no helper of the person's stores the token.
        argv += ["-c", "credential.helper=", "-c", _HELPER]
        extra[TOKEN_VARIABLE] = token
    argv += ["push", "--porcelain", *(["--atomic"] if atomic else []), remote, *refspecs]
    result = proc.run(
        argv, repo_path, timeout=timeout, env=env, extra_env=extra, interruptible=False
    )
    if result.ok:
        return
    output = scrub(result.output, token)
    first = next((line for line in output.splitlines() if line.strip()), "no output").strip()
    names = ", ".join(spec.rsplit(":", 1)[-1].removeprefix("refs/heads/") for spec in refspecs)
    if _REJECTED.search(output):
        raise PushRejected(f"{remote} has commits that {names} lacks ({first})", first)
    if _REFUSED.search(output):
        raise PushRefused(f"{remote} refused the push's credentials ({first})", first)
    if result.timed_out:
        raise TransientError(f"pushing {names} to {remote} timed out")
    raise TransientError(f"pushing {names} to {remote} failed: {first[:300]}")


def scrub(text: str, token: str | None) -> str:
    """`text` without the token (a remote that echoes it must not leak it)."""
    return text.replace(token, "***") if token else text
