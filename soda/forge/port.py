"""The forge port: what soda asks of a forge, and the data it gets back.

`Forge` is the seam (GitHub's implementation is `soda.forge.github`; a second
forge is one module implementing it and one entry in `soda.forge.kinds.FORGES`).
Everything here is plain data in no one forge's words: the pull request, a check
on its head commit (a check run or a commit status), and a comment (inline
review comment, review body, or conversation comment) whose author the forge
says is a writer (may write to the repository: a person soda listens to) or not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

CommentKind = Literal["review_comment", "review", "issue_comment"]

FAILED = frozenset({"failure", "timed_out", "cancelled", "action_required", "error"})
"""Conclusions (check runs) and states (commit statuses) that fail a check."""
PASSED = frozenset({"success", "neutral", "skipped"})
"""Conclusions and states that pass one."""


@dataclass(frozen=True)
class PullRequest:
    number: int
    forge_id: str
    """The forge's own id for it where its API needs one besides the number
    (GitHub: the GraphQL node id); "" when it needs none."""
    url: str
    """Its page on the forge (for `soda status`; never written into a body)."""
    head_sha: str
    draft: bool
    state: str
    """open or closed."""
    merged: bool


@dataclass(frozen=True)
class Check:
    """One check on a commit: a check run (CI job) or a commit status."""

    name: str
    source: Literal["check_run", "status"]
    item_id: int
    conclusion: str | None
    """success, failure, neutral, cancelled, skipped, timed_out, action_required
    (check runs), error, failure, success (statuses); None while not finished."""
    excerpt: str = ""
    """A bounded excerpt of what it said (title, summary, text or description)."""

    @property
    def failed(self) -> bool:
        return self.conclusion in FAILED

    @property
    def passed(self) -> bool:
        return self.conclusion in PASSED

    @property
    def pending(self) -> bool:
        return not (self.failed or self.passed)


@dataclass(frozen=True)
class Comment:
    kind: CommentKind
    item_id: int
    author: str
    role: str
    """The author's relation to the repository in the forge's words (recorded and
    shown; GitHub's OWNER, CONTRIBUTOR, NONE...)."""
    body: str
    path: str | None = None
    """For an inline review comment: the file, and its line (if the forge gives one)."""
    line: int | None = None
    review_state: str | None = None
    """For a review: APPROVED, CHANGES_REQUESTED, COMMENTED, ..."""
    writer: bool = False
    """The forge says the author may write to the repository."""


class Forge(Protocol):
    """A forge holding the repository's pull requests. Failures: `TransientError`
    (rate limit, 5xx, network; already retried), `CredentialsError` (the token was
    refused), `UserError` (the repository or the request is wrong)."""

    def find_pull(self, head: str, base: str) -> PullRequest | None:
        """The open pull request from branch `head` into `base`, if there is one."""
        ...

    def open_pull(
        self, head: str, base: str, title: str, body: str, draft: bool
    ) -> PullRequest: ...

    def get_pull(self, number: int) -> PullRequest: ...

    def update_body(self, number: int, body: str) -> None: ...

    def mark_ready(self, pull: PullRequest) -> None:
        """Take the pull request out of draft."""
        ...

    def merge(self, number: int, sha: str) -> bool:
        """Merge it if its head is still `sha`; False when the forge refused."""
        ...

    def checks(self, sha: str) -> list[Check]:
        """The check runs and commit statuses on commit `sha`."""
        ...

    def forget_checks(self, sha: str) -> None:
        """Drop what was kept to read commit `sha`'s checks cheaply again (ETags):
        it is the head no more."""
        ...

    def comments(self, number: int) -> list[Comment]:
        """Every inline comment, review and conversation comment, oldest first."""
        ...

    def reply(self, number: int, comment: Comment, body: str) -> None:
        """Answer `comment` on its thread (inline), or on the conversation."""
        ...


@dataclass(frozen=True)
class Issue:
    """An open issue carrying the tracker's label, as the forge gives it."""

    number: int
    item_id: int
    """The forge's own id for it (stable across renumbering and transfers)."""
    title: str
    body: str
    author: str
    role: str
    """The author's relation to the repository in the forge's words."""
    writer: bool
    """The forge says the author may write to the repository."""
    labels: tuple[str, ...]
    updated: str = ""
    """When the forge last changed it (a label, the body, a comment), in its words."""


@dataclass(frozen=True)
class IssueEvent:
    """One event in an issue's history, as the forge gives it: who did what."""

    item_id: int
    """The forge's own id for the event."""
    kind: str
    """In the forge's words: GitHub's `labeled`, `unlabeled`, `closed`, ..."""
    actor: str
    label: str | None = None
    """The label a `labeled` or `unlabeled` event names."""


@runtime_checkable
class Tracker(Protocol):
    """A forge's issue tracker: what `[tracker]` reads and writes. Failures as `Forge`'s."""

    def labelled_issues(self, label: str) -> list[Issue]:
        """The open issues (not pull requests) carrying `label`, oldest first."""
        ...

    def issue_comments(self, number: int) -> list[Comment]:
        """The conversation comments on issue `number`, oldest first."""
        ...

    def comment_issue(self, number: int, body: str) -> int:
        """Post `body` on issue `number`; the new comment's id."""
        ...

    def issue_events(self, number: int) -> list[IssueEvent]:
        """What was done to issue `number` (labels added and removed, closed,
        ...) and by whom, oldest first."""
        ...

    def may_write(self, login: str) -> bool:
        """The forge says `login` may write to the repository."""
        ...
