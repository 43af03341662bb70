"""The `soda.toml` sections about the forge: `[forge]` (the milestone as a pull
request) and `[tracker]` (work taken from the forge's issues). Every field is
documented by the docstring under it, as in soda.config.sections."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from soda.config.sections import Section


class ForgeConfig(Section):
    mode: Literal["off", "draft", "ready"] = "off"
    """Pull-request mode: "off" (the milestone branch stays in your clone), "draft"
    (push it and open one draft pull request per milestone, marked ready for review
    at DONE) or "ready" (the same, opened ready for review)."""
    kind: Literal["github"] = "github"
    """Which forge speaks for the remote: "github" (GitHub, GitHub Enterprise, or a
    server with GitHub's REST API at `api_url`)."""
    remote: str = "origin"
    """Git remote the milestone branch is pushed to."""
    api_url: str = "https://api.github.com"
    """The forge's REST API, e.g. "https://ghe.example.com/api/v3" for GitHub
    Enterprise."""
    graphql_url: str | None = None
    """The GraphQL endpoint (marking a draft ready takes it); unset: derived from
    `api_url` ("/api/v3" -> "/api/graphql", otherwise api_url + "/graphql")."""
    repository: str | None = None
    """"owner/name" of the repository on the forge; unset: read from the remote's URL."""
    token_env: str = "GITHUB_TOKEN"
    """Name of the environment variable holding the forge token (see the README for
    the permissions it needs). The token is given to git for one push at a time and
    is never written to disk, logs, events or the database."""
    merge: Literal["never", "when-green"] = "never"
    """Whether soda merges the pull request itself: "never" (a person does), or
    "when-green" (at DONE, once every check on the head commit passed)."""
    writers: list[str] = Field(default_factory=list)
    """Forge logins whose comments count as corrections besides the repository's
    owners, members and collaborators. Everyone else's comments are ignored."""
    poll_seconds: float = Field(60.0, ge=1, le=86_400, allow_inf_nan=False)
    """How often, in seconds, the daemon reads the pull request while nothing else
    happens (1-86400); an unchanged pull request costs no rate limit (ETags)."""
    timeout: float = Field(30.0, ge=0.1, le=600, allow_inf_nan=False)
    """Seconds one request to the forge may take (0.1-600)."""
    max_retries: int = Field(3, ge=0, le=10)
    """Retries of one request after a rate limit or a 5xx answer (0-10)."""
    max_retry_wait: float = Field(60.0, ge=0, le=3600, allow_inf_nan=False)
    """Seconds one retry may wait at most, whatever the forge asks (0-3600)."""


class TrackerConfig(Section):
    enabled: bool = False
    """Take work from the forge's issues (`[forge]` names the forge, its token and
    repository): each open issue a writer gave `label` becomes a queued milestone
    with its own spec and branch, which the daemon works one at a time (`soda
    issues sync` reads the tracker in the foreground)."""
    label: str = Field("soda", min_length=1, max_length=50)
    """The label that means "soda, take this"."""
    writers: list[str] = Field(default_factory=list)
    """Forge logins who may hand work over and speak on an issue's thread besides
    the repository's owners, members and collaborators. Everyone else's issues and
    comments are stored as data and never acted on."""
    spec_dir: str = "specs"
    """Where each issue's spec is written (`specs/issue-N.md`), relative to soda.toml."""
    poll_seconds: float = Field(60.0, ge=0, le=86_400, allow_inf_nan=False)
    """How often, in seconds, the daemon reads the tracker (0-86400; at its ticks:
    `[daemon] tick_seconds` bounds how often it looks). Each read also finishes
    the done issues' pull requests that waited for their checks (ready, or merged
    with `[forge] merge = "when-green"`). Reads are conditional: an unchanged
    tracker costs no rate limit after the first read, and never a model
    call."""
    priority: list[str] = Field(
        default_factory=lambda: ["priority:high", "priority:medium", "priority:low"]
    )
    """Labels that order the queue, first first: of the issues ready to run (their
    "Depends on #M" done), one carrying an earlier label here runs first, then the
    oldest."""
    fleet: str | None = None
    """The fleet's Temporal server, HOST:PORT (see "Many repositories"): each
    queued issue whose "Depends on #M" are done runs as its own fleet run (on the
    `soda worker`s, several at once) instead of one at a time in the daemon. Not
    set: the daemon works the queue itself."""
    fleet_namespace: str = Field("default", min_length=1, max_length=200)
    """The Temporal namespace of `fleet`."""

    @field_validator("fleet")
    @classmethod
    def _fleet_is_host_and_port(cls, value: str | None) -> str | None:
        if value is not None:
            host, _, port = value.rpartition(":")
            if not host.strip() or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f'{value!r} is not HOST:PORT (e.g. "127.0.0.1:7233")')
        return value
