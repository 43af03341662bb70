"""Pull requests: the milestone as a pull request on a forge, its CI as a second
gate, and review comments from people with write access as corrections.

    port.py     the `Forge` protocol and its data (pull request, check, comment)
    kinds.py    the forges by `[forge] kind`: the one registry `connect` reads
    github.py   GitHub's REST API (GraphQL for "ready for review"), over http.py
                (one request: retries, ETags, what each status means)
    push.py     the milestone branch pushed with the token for that one command
    pulls.py    `PullRequests`: publish, poll, reply, DONE; idempotent against
                the rows in soda.store.forge, so a restart repeats nothing
    body.py     what soda writes: the body, replies, the marker of its own text
    tracker.py  `[tracker]`: labelled issues as queued milestones, their threads
                as input, the comments soda writes back (rows: soda.store.tracker)
    done.py     the tracker's done issues whose pull request waits for its checks,
                settled at each poll of the tracker (ready, merged, or queued again)

`connect` builds the service from `[forge]` (None when `mode = "off"`); the loop
calls it at SENSE, after each iteration and at DONE, and the idle daemon on its
tick (soda.loop.pr).

May import: config, contracts, errors, events, repo, store, system.
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlite_utils import Database

from soda.config import Config
from soda.errors import ConfigError, UserError
from soda.forge.port import Forge, Tracker
from soda.forge.pulls import Poll, PullRequests, stored_checks
from soda.system.clock import SYSTEM_CLOCK, Clock

__all__ = ["Poll", "PullRequests", "Tracker", "connect", "connect_tracker", "stored_checks"]


def connect(
    config: Config,
    db: Database,
    branch: str,
    clock: Clock = SYSTEM_CLOCK,
) -> PullRequests | None:
    """The milestone's pull requests as `[forge]` sets them up, or None when off.
    A missing token or a repository that cannot be named is a user error."""
    forge = config.forge
    if forge.mode == "off":
        return None
    built, repository, token = _built(config, db, clock, f"forge.mode = {forge.mode!r}")
    return PullRequests(
        built,
        forge,
        repository,
        db,
        Path(config.root),
        branch,
        config.project.base_branch,
        token,
    )


def _built(config: Config, db: Database, clock: Clock, needs: str) -> tuple[Forge, str, str]:
    """The forge `[forge]` names, its repository and token; a missing token or a
    repository that cannot be named is a user error. The forge's HTTP client and
    git's are imported here, so reading the store (`soda status`) needs neither."""
    from soda.forge.kinds import forge_for
    from soda.forge.push import remote_url, repository_from_url

    forge = config.forge
    token = os.environ.get(forge.token_env, "").strip()
    if not token:
        raise UserError(
            f"soda.toml: forge.token_env: the environment variable {forge.token_env} is not"
            f" set ({needs} needs a token; see the README's 'Pull requests')"
        )
    repository = forge.repository
    if repository is None:
        url = remote_url(config.root, forge.remote)
        repository = repository_from_url(url)
        if repository is None:
            raise ConfigError(
                f"soda.toml: forge.repository: cannot read owner/name from the URL of"
                f" remote {forge.remote!r}; set forge.repository"
            )
    elif repository.count("/") != 1 or not all(repository.split("/")):
        raise ConfigError(f"soda.toml: forge.repository: {repository!r} is not owner/name")
    return forge_for(forge.kind).build(forge, token, repository, db, clock), repository, token


def connect_tracker(config: Config, db: Database, clock: Clock = SYSTEM_CLOCK) -> Tracker:
    """The forge's issue tracker (`[tracker]`, on the forge `[forge]` names);
    a user error when `[tracker] enabled` is false."""
    if not config.tracker.enabled:
        raise UserError("soda.toml: tracker.enabled is false: set it to true to take issues")
    built, _, _ = _built(config, db, clock, "tracker.enabled = true")
    if not isinstance(built, Tracker):
        raise UserError(f"soda.toml: forge.kind: {config.forge.kind!r} has no issue tracker")
    return built


def doctor(config: Config, db: Database, ping: bool = False) -> str:
    """`soda doctor`'s line: off, or the repository and token in place; with `ping`,
    one request proves the token can read the repository's pull requests."""
    forge = config.forge
    if forge.mode == "off":
        return "off (forge.mode)"
    pulls = connect(config, db, "soda-doctor")
    assert pulls is not None
    where = f"{pulls.repository} at {forge.api_url}, token in ${forge.token_env}"
    if not ping:
        return f"{forge.mode}: {where} (--ping checks the token)"
    pulls.forge.find_pull("soda-doctor", config.project.base_branch)
    return f"{forge.mode}: {where}; the token reads its pull requests"
