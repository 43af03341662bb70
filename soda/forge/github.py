"""GitHub (and GitHub Enterprise, and servers speaking its REST API) as a `Forge`.

REST for everything but one step: REST cannot take a pull request out of draft
(`PATCH draft:false` answers 200 and changes nothing), so `mark_ready` uses the
GraphQL mutation `markPullRequestReadyForReview`. Lists are read a page of 100 at
a time, at most MAX_PAGES pages; every GET carries the ETag of its last answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlite_utils import Database

from soda.config import ForgeConfig
from soda.errors import CredentialsError, UserError
from soda.forge.http import ForgeRefused, RestClient
from soda.forge.port import Check, Comment, CommentKind, Issue, IssueEvent, PullRequest
from soda.store import forge as rows
from soda.system.clock import Clock

PER_PAGE = 100
MAX_PAGES = 10
"""Pages of one list read at most (1000 comments of a kind on one pull request)."""
MAX_EXCERPT_CHARS = 1500
"""Characters of a check's output kept for ORIENT."""

HEADERS = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
"""What every request to GitHub's REST API carries."""
WRITER_ASSOCIATIONS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})
"""`author_association` values of people with write access to the repository."""
WRITE_PERMISSIONS = frozenset({"admin", "write"})
"""A collaborator's `permission` that lets them write (GitHub says `write` for
the maintain role too, and `read` for triage)."""

READY_MUTATION = (
    "mutation($id: ID!) { markPullRequestReadyForReview(input: {pullRequestId: $id})"
    " { pullRequest { isDraft } } }"
)


def graphql_url(api_url: str) -> str:
    """GitHub Enterprise serves REST at /api/v3 and GraphQL at /api/graphql;
    api.github.com serves both at its root."""
    base = api_url.rstrip("/")
    if base.endswith("/api/v3"):
        return base[: -len("/v3")] + "/graphql"
    return base + "/graphql"


def connect_github(
    forge: ForgeConfig, token: str, repository: str, db: Database, clock: Clock
) -> GitHubForge:
    """`[forge] kind = "github"`: REST at `api_url` with GitHub's headers, GraphQL
    at `graphql_url` (derived from `api_url` when unset)."""
    client = RestClient(
        forge.api_url, token, forge.token_env, db, clock, timeout=forge.timeout,
        max_retries=forge.max_retries, max_retry_wait=forge.max_retry_wait, headers=HEADERS,
    )  # fmt: skip
    return GitHubForge(client, repository, forge.graphql_url or graphql_url(forge.api_url))


@contextmanager
def _reading(what: str) -> Iterator[None]:
    """An answer without the fields GitHub's API has is a misdirected `api_url` (or
    a server that is not GitHub-compatible): a user error, never a traceback."""
    try:
        yield
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise UserError(
            f"forge: the answer for {what} is not GitHub's ({type(exc).__name__}: {exc});"
            " is forge.api_url a GitHub-compatible API?"
        ) from exc


class GitHubForge:
    """One repository ("owner/name") on a GitHub-compatible forge."""

    def __init__(self, client: RestClient, repository: str, graphql: str) -> None:
        self.client = client
        self.repository = repository
        self.owner = repository.split("/", 1)[0]
        self.graphql = graphql
        self._repo_path = f"/repos/{repository}"

    def find_pull(self, head: str, base: str) -> PullRequest | None:
        found = self.client.get(
            f"{self._repo_path}/pulls",
            {"head": f"{self.owner}:{head}", "base": base, "state": "open", "per_page": PER_PAGE},
        )
        return _pull(found[0]) if found else None

    def open_pull(self, head: str, base: str, title: str, body: str, draft: bool) -> PullRequest:
        data = {"title": title, "head": head, "base": base, "body": body, "draft": draft}
        try:
            return _pull(self.client.request("POST", f"{self._repo_path}/pulls", data))
        except ForgeRefused:
            existing = self.find_pull(head, base)  # opened by an earlier, cut-short try
            if existing is None:
                raise
            return existing

    def get_pull(self, number: int) -> PullRequest:
        return _pull(self.client.get(f"{self._repo_path}/pulls/{number}"))

    def update_body(self, number: int, body: str) -> None:
        self.client.request("PATCH", f"{self._repo_path}/pulls/{number}", {"body": body})

    def mark_ready(self, pull: PullRequest) -> None:
        answer = self.client.request(
            "POST",
            "",
            {"query": READY_MUTATION, "variables": {"id": pull.forge_id}},
            url=self.graphql,
        )
        errors = answer.get("errors") if isinstance(answer, dict) else None
        if errors:
            first = errors[0].get("message", "") if isinstance(errors[0], dict) else errors[0]
            raise UserError(f"forge: marking pull request #{pull.number} ready failed: {first}")

    def merge(self, number: int, sha: str) -> bool:
        try:
            answer = self.client.request(
                "PUT", f"{self._repo_path}/pulls/{number}/merge", {"sha": sha}
            )
        except CredentialsError:
            raise
        except UserError:  # 405 not mergeable (reviews, protection), 409 head moved, 422
            return False
        return bool(isinstance(answer, dict) and answer.get("merged"))

    def forget_checks(self, sha: str) -> None:
        rows.forget_etags(self.client.db, f"{self._repo_path}/commits/{sha}/")

    def checks(self, sha: str) -> list[Check]:
        with _reading(f"the checks of {sha[:10]}"):
            return self._checks(sha)

    def _checks(self, sha: str) -> list[Check]:
        found: list[Check] = []
        for page in self._pages(f"{self._repo_path}/commits/{sha}/check-runs", "check_runs"):
            for run in page:
                output = run.get("output") or {}
                text = "\n".join(
                    str(output.get(key) or "") for key in ("title", "summary", "text")
                ).strip()
                conclusion = run.get("conclusion") if run.get("status") == "completed" else None
                found.append(Check(run["name"], "check_run", run["id"], conclusion, _excerpt(text)))
        newest: dict[str, dict[str, Any]] = {}
        for page in self._pages(f"{self._repo_path}/commits/{sha}/statuses"):
            for status in page:  # newest first: the first of each context counts
                newest.setdefault(status["context"], status)
        for context, status in newest.items():
            state = status["state"]
            found.append(
                Check(
                    context,
                    "status",
                    status["id"],
                    None if state == "pending" else state,
                    _excerpt(status.get("description") or ""),
                )
            )
        return found

    def comments(self, number: int) -> list[Comment]:
        with _reading(f"the comments of pull request #{number}"):
            return self._comments(number)

    def _comments(self, number: int) -> list[Comment]:
        found: list[Comment] = []
        for page in self._pages(f"{self._repo_path}/pulls/{number}/comments"):
            found += [_comment("review_comment", c) for c in page]
        for page in self._pages(f"{self._repo_path}/pulls/{number}/reviews"):
            found += [_comment("review", r) for r in page if r.get("state") != "PENDING"]
        for page in self._pages(f"{self._repo_path}/issues/{number}/comments"):
            found += [_comment("issue_comment", c) for c in page]
        return found

    def reply(self, number: int, comment: Comment, body: str) -> None:
        if comment.kind == "review_comment":
            path = f"{self._repo_path}/pulls/{number}/comments/{comment.item_id}/replies"
        else:
            path = f"{self._repo_path}/issues/{number}/comments"
        self.client.request("POST", path, {"body": body})

    # --- the issue tracker (`soda.forge.port.Tracker`) ---------------------------

    def labelled_issues(self, label: str) -> list[Issue]:
        with _reading(f"the issues labelled {label!r}"):
            found: list[Issue] = []
            params = {"labels": label, "state": "open", "sort": "created", "direction": "asc"}
            for page in self._pages(f"{self._repo_path}/issues", params=params):
                found += [_issue(data) for data in page if "pull_request" not in data]
            return found

    def issue_comments(self, number: int) -> list[Comment]:
        with _reading(f"the comments of issue #{number}"):
            found: list[Comment] = []
            for page in self._pages(f"{self._repo_path}/issues/{number}/comments"):
                found += [_comment("issue_comment", c) for c in page]
            return found

    def comment_issue(self, number: int, body: str) -> int:
        answer = self.client.request(
            "POST", f"{self._repo_path}/issues/{number}/comments", {"body": body}
        )
        with _reading(f"the comment posted on issue #{number}"):
            return int(answer["id"])

    def issue_events(self, number: int) -> list[IssueEvent]:
        with _reading(f"the events of issue #{number}"):
            found: list[IssueEvent] = []
            for page in self._pages(f"{self._repo_path}/issues/{number}/events"):
                found += [_event(data) for data in page]
            return found

    def may_write(self, login: str) -> bool:
        path = f"{self._repo_path}/collaborators/{login}/permission"
        with _reading(f"{login}'s permission"):
            return str(self.client.get(path)["permission"]) in WRITE_PERMISSIONS

    def _pages(
        self, path: str, key: str | None = None, params: dict[str, Any] | None = None
    ) -> list[list[dict[str, Any]]]:
        pages = []
        for page in range(1, MAX_PAGES + 1):
            answer = self.client.get(path, {**(params or {}), "per_page": PER_PAGE, "page": page})
            items = answer.get(key, []) if key and isinstance(answer, dict) else answer
            if not isinstance(items, list):
                break
            pages.append(items)
            if len(items) < PER_PAGE:
                break
        return pages


def _pull(data: dict[str, Any]) -> PullRequest:
    with _reading("a pull request"):
        return _pull_of(data)


def _pull_of(data: dict[str, Any]) -> PullRequest:
    return PullRequest(
        number=int(data["number"]),
        forge_id=str(data["node_id"]),
        url=str(data["html_url"]),
        head_sha=str(data["head"]["sha"]),
        draft=bool(data.get("draft")),
        state=str(data["state"]),
        merged=bool(data.get("merged") or data.get("merged_at")),
    )


def _comment(kind: CommentKind, data: dict[str, Any]) -> Comment:
    user = data.get("user") or {}
    line = data.get("line") if kind == "review_comment" else None
    return Comment(
        kind=kind,
        item_id=int(data["id"]),
        author=str(user.get("login") or "ghost"),
        role=str(data.get("author_association") or "NONE"),
        writer=data.get("author_association") in WRITER_ASSOCIATIONS,
        body=str(data.get("body") or ""),
        path=data.get("path") if kind == "review_comment" else None,
        line=int(line) if isinstance(line, int) else None,
        review_state=data.get("state") if kind == "review" else None,
    )


def _issue(data: dict[str, Any]) -> Issue:
    user = data.get("user") or {}
    labels = [
        str(label.get("name") if isinstance(label, dict) else label)
        for label in data.get("labels") or []
    ]
    return Issue(
        number=int(data["number"]),
        item_id=int(data["id"]),
        title=str(data.get("title") or ""),
        body=str(data.get("body") or ""),
        author=str(user.get("login") or "ghost"),
        role=str(data.get("author_association") or "NONE"),
        writer=data.get("author_association") in WRITER_ASSOCIATIONS,
        labels=tuple(labels),
        updated=str(data.get("updated_at") or ""),
    )


def _event(data: dict[str, Any]) -> IssueEvent:
    actor = data.get("actor") or {}
    label = data.get("label") or {}
    return IssueEvent(
        item_id=int(data["id"]),
        kind=str(data["event"]),
        actor=str(actor.get("login") or "ghost"),
        label=str(label["name"]) if isinstance(label, dict) and "name" in label else None,
    )


def _excerpt(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_EXCERPT_CHARS else text[:MAX_EXCERPT_CHARS] + " [...]"
