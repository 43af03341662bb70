"""A GitHub stand-in on 127.0.0.1: the subset of the REST API (and the one GraphQL
mutation) soda uses, over a real bare repository as the remote.

Every answer it sends is checked against GitHub's published OpenAPI description
(tests/openapi.py) before it goes out; a mismatch is recorded and fails the test
at teardown (`FakeForge.problems`), so the stand-in cannot drift from GitHub's
shapes. Answers start from the description's own minimal instance of the schema
and carry the facts kept here: pull requests (their head read from the bare
repository), check runs and statuses per commit, comments of the three kinds.
GETs carry ETags and answer 304 to a matching If-None-Match (`costly` counts the
requests that would cost rate limit). `faults` queues answers for the next
requests (a 403 without rate-limit headers, a rate limit, a 500); `hold_after`
holds an answer after its effect, so a test can kill the client there. As on GitHub,
`PATCH draft:false` answers 200 and changes nothing.

    pytest_plugins = ("tests.fakeforge",)    # then the `fake_forge` fixture

PYTEST_DONT_REWRITE: test modules import its names before pytest loads it.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import subprocess
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests import openapi

TOKEN = "ghp_TESTtoken0123456789abcdefSECRET"
OWNER, NAME = "acme", "widgets"
SODA_LOGIN = "soda-bot"
HOLD_SECONDS = 30.0
_ids = itertools.count(1000)

_ROUTES: list[tuple[str, str]] = [
    ("GET", "/repos/{owner}/{repo}/pulls"),
    ("POST", "/repos/{owner}/{repo}/pulls"),
    ("GET", "/repos/{owner}/{repo}/pulls/{pull_number}"),
    ("PATCH", "/repos/{owner}/{repo}/pulls/{pull_number}"),
    ("PUT", "/repos/{owner}/{repo}/pulls/{pull_number}/merge"),
    ("GET", "/repos/{owner}/{repo}/commits/{ref}/check-runs"),
    ("GET", "/repos/{owner}/{repo}/commits/{ref}/statuses"),
    ("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/comments"),
    ("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews"),
    ("GET", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
    ("POST", "/repos/{owner}/{repo}/pulls/{pull_number}/comments/{comment_id}/replies"),
    ("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
    ("GET", "/repos/{owner}/{repo}/issues"),
    ("GET", "/repos/{owner}/{repo}/issues/{issue_number}/events"),
    ("GET", "/repos/{owner}/{repo}/collaborators/{username}/permission"),
]
WRITING = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})


def _pattern(template: str) -> re.Pattern[str]:
    return re.compile("^" + re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", template) + "$")


_COMPILED = [(method, template, _pattern(template)) for method, template in _ROUTES]


@dataclass
class Fault:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    only: str = ""
    """Answer only a request whose path contains this."""


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    status: int = 0


class FakeForge:
    def __init__(self, bare: Path) -> None:
        self.bare = bare
        self.lock = threading.Lock()
        self.pulls: dict[int, dict[str, Any]] = {}
        self.check_runs: dict[str, list[dict[str, Any]]] = {}
        self.statuses: dict[str, list[dict[str, Any]]] = {}
        self.review_comments: dict[int, list[dict[str, Any]]] = {}
        self.reviews: dict[int, list[dict[str, Any]]] = {}
        self.issue_comments: dict[int, list[dict[str, Any]]] = {}
        self.issues: dict[int, dict[str, Any]] = {}
        """Issues by number (numbered after the pull requests, as GitHub shares
        one sequence): `add_issue`."""
        self.issue_events: dict[int, list[dict[str, Any]]] = {}
        """Each issue's events (labels added and removed, by whom), oldest first."""
        self.permissions: dict[str, str] = {}
        """A login's permission on the repository; unset: `write` for a login last
        seen as OWNER, MEMBER or COLLABORATOR, else `read`."""
        self._roles: dict[str, str] = {SODA_LOGIN: "OWNER"}
        self.faults: deque[Fault] = deque()
        self.requests: list[Seen] = []
        self.problems: list[str] = []
        self.costly = 0
        self.hold_after: set[tuple[str, str]] = set()
        """(method, template) whose answer waits, after its effect, until `release`
        is set (at most HOLD_SECONDS): the moment to kill the client in."""
        self.held = threading.Event()
        self.release = threading.Event()
        self.ci: str | None = None
        """When set, every new head of a pull request gets a check run of this name,
        running until a test finishes it (`finish_ci`): CI on each push."""
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    # --- what a test sets up ---------------------------------------------------

    def head_of(self, branch: str) -> str | None:
        done = subprocess.run(
            ["git", "rev-parse", "--verify", "-q", f"refs/heads/{branch}"],
            cwd=self.bare,
            capture_output=True,
            text=True,
        )
        return done.stdout.strip() or None

    def add_check(self, sha: str, name: str, conclusion: str | None, text: str = "") -> None:
        run = openapi.component("check-run")
        run.update(
            id=next(_ids),
            name=name,
            head_sha=sha,
            status="completed" if conclusion else "in_progress",
            conclusion=conclusion,
        )
        run["output"].update(title=f"{name}: {conclusion}", summary=text, text=None)
        with self.lock:
            self.check_runs.setdefault(sha, []).append(run)

    def add_status(self, sha: str, context: str, state: str, description: str = "") -> None:
        status = openapi.component("status")
        status.update(id=next(_ids), context=context, state=state, description=description)
        with self.lock:
            self.statuses.setdefault(sha, []).insert(0, status)  # newest first

    def add_review_comment(
        self, number: int, login: str, association: str, body: str, path: str, line: int
    ) -> int:
        comment = _by("pull-request-review-comment", login, association, body, path=path, line=line)
        return self._add(self.review_comments, number, comment)

    def add_review(self, number: int, login: str, association: str, state: str, body: str) -> int:
        review = _by("pull-request-review", login, association, body, state=state)
        return self._add(self.reviews, number, review)

    def add_issue_comment(self, number: int, login: str, association: str, body: str) -> int:
        self._roles[login] = association
        with self.lock:
            if number in self.issues:
                self.issues[number]["updated_at"] = _moment()
        return self._add(
            self.issue_comments, number, _by("issue-comment", login, association, body)
        )

    def add_issue(
        self, login: str, association: str, title: str, body: str, labels: tuple[str, ...]
    ) -> int:
        """An open issue filed by `login` (who also added its `labels`); its number."""
        issue = openapi.component("issue")
        with self.lock:
            self._roles[login] = association
            number = 100 + len(self.issues) + 1
            for name in labels:
                self._event(number, "labeled", login, name)
            issue.update(
                id=next(_ids), number=number, title=title, body=body, user=_user(login),
                author_association=association, state="open",
                labels=[_label(name) for name in labels], updated_at=_moment(),
            )  # fmt: skip
            issue.pop("pull_request", None)
            self.issues[number] = issue
        return number

    def edit_issue(self, number: int, by: str | None = None, **fields: Any) -> None:
        """Change an issue's fields as `by` (its author unless given); a change of
        labels is recorded as `labeled`/`unlabeled` events by `by`."""
        with self.lock:
            issue = self.issues[number]
            actor = by or issue["user"]["login"]
            if "labels" in fields:
                had = [label["name"] for label in issue["labels"]]
                for name in [n for n in had if n not in fields["labels"]]:
                    self._event(number, "unlabeled", actor, name)
                for name in [n for n in fields["labels"] if n not in had]:
                    self._event(number, "labeled", actor, name)
                fields["labels"] = [_label(name) for name in fields["labels"]]
            issue.update(fields)
            issue["updated_at"] = _moment()

    def _event(self, number: int, kind: str, login: str, label: str | None = None) -> None:
        schema = {"labeled": "labeled-issue-event", "unlabeled": "unlabeled-issue-event"}
        event = openapi.component(schema.get(kind, "labeled-issue-event"))
        event.update(id=next(_ids), event=kind, actor=_user(login))
        if label is not None:
            event["label"] = {"name": label, "color": "ededed"}
        self.issue_events.setdefault(number, []).append(event)

    def permission(self, login: str) -> str:
        role = self._roles.get(login, "NONE")
        return self.permissions.get(login) or ("write" if role in WRITING else "read")

    def _add(
        self, where: dict[int, list[dict[str, Any]]], number: int, item: dict[str, Any]
    ) -> int:
        with self.lock:
            where.setdefault(number, []).append(item)
        return int(item["id"])

    def finish_ci(self, sha: str, conclusion: str) -> None:
        with self.lock:
            for run in self.check_runs.get(sha, []):
                if run["name"] == self.ci:
                    run.update(status="completed", conclusion=conclusion)

    # --- the server ------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        forge = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                seen = Seen(
                    self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body
                )
                status, answer, headers = forge._answer(seen)
                seen.status = status
                with forge.lock:
                    forge.requests.append(seen)
                data = b"" if answer is None else json.dumps(answer).encode()
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("content-length", str(len(data)))
                if data:
                    self.send_header("content-type", "application/json")
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_PUT = _serve

        return Handler

    def _answer(self, seen: Seen) -> tuple[int, Any, dict[str, str]]:
        if seen.headers.get("authorization") != f"Bearer {TOKEN}":
            return 401, {"message": "Bad credentials", "documentation_url": "x"}, {}
        with self.lock:
            fault = next((f for f in self.faults if f.only in seen.path), None)
            if fault is not None:
                self.faults.remove(fault)
        if fault is not None:
            return fault.status, fault.body, fault.headers
        split = urlsplit(seen.path)
        query = {k: v[0] for k, v in parse_qs(split.query).items()}
        if split.path == "/graphql" and seen.method == "POST":
            return 200, self._graphql(seen.body), {}
        for method, template, pattern in _COMPILED:
            match = pattern.match(split.path)
            if match and (match["owner"], match["repo"]) != (OWNER, NAME):
                break  # GitHub's answer for a repository the token cannot see
            if method == seen.method and match:
                with self.lock:
                    status, answer = self._route(template, match.groupdict(), query, seen.body)
                if (method, template) in self.hold_after:
                    self.held.set()
                    self.release.wait(HOLD_SECONDS)
                problems = openapi.validate(method, template, status, answer)
                if problems:
                    self.problems.append(f"{method} {template} {status}: {problems[:3]}")
                    return 500, {"message": "stand-in answer breaks GitHub's schema"}, {}
                headers: dict[str, str] = {}
                if method == "GET":
                    tag = '"' + hashlib.sha256(json.dumps(answer).encode()).hexdigest() + '"'
                    headers["etag"] = tag
                    if seen.headers.get("if-none-match") == tag:
                        return 304, None, headers
                self.costly += 1
                return status, answer, headers
        return 404, {"message": "Not Found", "documentation_url": "x"}, {}

    def _route(
        self, template: str, args: dict[str, str], query: dict[str, str], body: Any
    ) -> tuple[int, Any]:
        number = int(args.get("pull_number") or args.get("issue_number") or 0)
        page, per_page = int(query.get("page", 1)), int(query.get("per_page", 30))

        def paged(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return items[(page - 1) * per_page : page * per_page]

        if template == "/repos/{owner}/{repo}/pulls":
            if body is None:
                head = query.get("head", "").split(":", 1)[-1]
                found = [
                    self._pull(n)
                    for n, p in self.pulls.items()
                    if p["head"] == head and p["state"] == query.get("state", "open")
                ]
                return 200, paged(found)
            if any(p["head"] == body["head"] and p["state"] == "open" for p in self.pulls.values()):
                return 422, {"message": "Validation Failed", "documentation_url": "x"}
            number = len(self.pulls) + 1
            self.pulls[number] = {
                "head": body["head"],
                "base": body["base"],
                "title": body["title"],
                "body": body.get("body"),
                "draft": bool(body.get("draft")),
                "state": "open",
                "merged": False,
            }
            return 201, self._pull(number)
        if template == "/repos/{owner}/{repo}/pulls/{pull_number}":
            if body is not None:
                for key in ("title", "body", "state"):  # `draft` is not REST's to change
                    if key in body:
                        self.pulls[number][key] = body[key]
            return 200, self._pull(number)
        if template.endswith("/merge"):
            pull = self.pulls[number]
            if self.head_of(pull["head"]) != body.get("sha"):
                return 409, {"message": "Head branch was modified", "documentation_url": "x"}
            self._merge(pull)
            pull.update(merged=True, state="closed")
            return 200, {"sha": self.head_of(pull["base"]), "merged": True, "message": "merged"}
        if template.endswith("/check-runs"):
            runs = self.check_runs.get(args["ref"], [])
            return 200, {"total_count": len(runs), "check_runs": paged(runs)}
        if template.endswith("/statuses"):
            return 200, paged(self.statuses.get(args["ref"], []))
        if template == "/repos/{owner}/{repo}/pulls/{pull_number}/comments":
            return 200, paged(self.review_comments.get(number, []))
        if template.endswith("/reviews"):
            return 200, paged(self.reviews.get(number, []))
        if template == "/repos/{owner}/{repo}/issues/{issue_number}/comments":
            if body is None:
                return 200, paged(self.issue_comments.get(number, []))
            comment = _by("issue-comment", SODA_LOGIN, "OWNER", body["body"])
            self.issue_comments.setdefault(number, []).append(comment)
            if number in self.issues:
                self.issues[number]["updated_at"] = _moment()
            return 201, comment
        if template == "/repos/{owner}/{repo}/issues":
            wanted = {name for name in query.get("labels", "").split(",") if name}
            found = [
                issue
                for issue in self.issues.values()
                if issue["state"] == query.get("state", "open")
                and wanted <= {label["name"] for label in issue["labels"]}
            ]
            return 200, paged(found)
        if template.endswith("/events"):
            return 200, paged(self.issue_events.get(number, []))
        if template.endswith("/permission"):
            login = args["username"]
            answer = openapi.example("GET", template, 200)
            answer.update(permission=self.permission(login), role_name=self.permission(login))
            return 200, answer
        if template.endswith("/replies"):
            parent = int(args["comment_id"])
            original = next(c for c in self.review_comments[number] if c["id"] == parent)
            comment = _by(
                "pull-request-review-comment",
                SODA_LOGIN,
                "OWNER",  # soda's token's association: a writer's
                body["body"],
                path=original["path"],
                line=original.get("line"),
                in_reply_to_id=parent,
            )
            self.review_comments[number].append(comment)
            return 201, comment
        raise AssertionError(f"no route for {template}")

    def _graphql(self, body: Any) -> dict[str, Any]:
        if "markPullRequestReadyForReview" not in body.get("query", ""):
            return {"errors": [{"message": "unknown query"}]}
        node = body["variables"]["id"]
        with self.lock:
            for number, pull in self.pulls.items():
                if f"PR_{number}" == node:
                    pull["draft"] = False
                    return {
                        "data": {
                            "markPullRequestReadyForReview": {"pullRequest": {"isDraft": False}}
                        }
                    }
        return {
            "errors": [{"message": f"Could not resolve to a node with the global id of '{node}'"}]
        }

    def _pull(self, number: int) -> dict[str, Any]:
        pull = self.pulls[number]
        data = openapi.example("GET", "/repos/{owner}/{repo}/pulls/{pull_number}", 200)
        data.update(
            number=number,
            node_id=f"PR_{number}",
            html_url=f"{self.url}/{OWNER}/{NAME}/pull/{number}",
            title=pull["title"],
            body=pull["body"],
            draft=pull["draft"],
            state=pull["state"],
            merged=pull["merged"],
        )
        head = self.head_of(pull["head"]) or "0" * 40
        data["head"].update(ref=pull["head"], sha=head)
        if self.ci and not any(r["name"] == self.ci for r in self.check_runs.get(head, [])):
            run = openapi.component("check-run")
            run.update(id=next(_ids), name=self.ci, head_sha=head, status="in_progress")
            self.check_runs.setdefault(head, []).append(run)
        data["base"].update(ref=pull["base"], sha=self.head_of(pull["base"]) or "0" * 40)
        return data

    def _merge(self, pull: dict[str, Any]) -> None:
        """A real merge in the bare repository: tree, merge commit, ref."""

        def git(*args: str) -> str:
            return subprocess.run(
                ["git", *args], cwd=self.bare, check=True, capture_output=True, text=True
            ).stdout.strip()

        base, head = f"refs/heads/{pull['base']}", f"refs/heads/{pull['head']}"
        tree = git("merge-tree", "--write-tree", base, head).splitlines()[0]
        commit = git("commit-tree", tree, "-p", base, "-p", head, "-m", "Merge pull request")
        git("update-ref", base, commit)


def _by(schema: str, login: str, association: str, body: str, **more: Any) -> dict[str, Any]:
    """A comment or review of GitHub's shape, by `login`."""
    item = openapi.component(schema)
    item.update(id=next(_ids), user=_user(login), author_association=association, body=body)
    item.update(more)
    return dict(item)


def _moment() -> str:
    """A distinct `updated_at` for each change, as GitHub's own moves on."""
    return f"2026-01-01T00:00:00.{next(_ids):06d}Z"


def _label(name: str) -> dict[str, Any]:
    label = openapi.component("label")
    label.update(id=abs(hash(name)) % 10_000_000, name=name)
    return dict(label)


def _user(login: str) -> dict[str, Any]:
    user = openapi.component("simple-user")
    user.update(login=login, id=abs(hash(login)) % 10_000_000)
    return user


@pytest.fixture
def fake_forge(tmp_path: Path) -> Iterator[FakeForge]:
    """The stand-in over a fresh bare repository (`fake_forge.bare`)."""
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    forge = FakeForge(bare)
    forge.thread.start()
    try:
        yield forge
    finally:
        forge.release.set()
        forge.server.shutdown()
        forge.server.server_close()
    assert not forge.problems, f"the stand-in broke GitHub's schema: {forge.problems}"
