"""HTTP to a forge: one request, its retries, its ETag, and what each answer means.

    200-299   the JSON body (a GET's ETag and body kept in `forge_etags`)
    304       the body kept with the ETag: unchanged, and free of rate limit
    401, 403  the token was refused: `CredentialsError` naming the variable
              (a 403 or 429 that says the rate limit ran out is transient)
    404       the repository or pull request is not there for this token: `UserError`
    422       the forge refused the request: `ForgeRefused` (a `UserError`; callers
              that expect one, such as "a pull request already exists", catch it)
    429, 5xx, timeouts, refused connections
              transient: retried up to `max_retries` times, waiting what the forge
              asks (Retry-After, X-RateLimit-Reset), at most `max_retry_wait`
              seconds each; then `TransientError`

The token goes into the Authorization header of each request and nowhere else:
no message, event or row made here holds it (errors name the variable instead).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
from sqlite_utils import Database

from soda.errors import CredentialsError, TransientError, UserError
from soda.store import forge as rows
from soda.system.clock import Clock

MAX_ERROR_CHARS = 300
"""Characters of a forge's error message kept in soda's own message."""


class ForgeRefused(UserError):
    """The forge answered 422: the request is not acceptable as it stands."""

    def __init__(self, message: str, body: Any) -> None:
        self.body = body
        super().__init__(message)


@dataclass
class RestClient:
    """Requests to one forge's API with one token (read from the environment by the
    caller, held only in memory)."""

    base_url: str
    token: str = field(repr=False)
    token_env: str
    db: Database
    clock: Clock
    timeout: float = 30.0
    max_retries: int = 3
    max_retry_wait: float = 60.0
    headers: dict[str, str] = field(default_factory=dict)
    """What every request carries besides the token: the forge's own (its media
    type, its API version)."""

    def __post_init__(self) -> None:
        self._client = httpx.Client(
            timeout=self.timeout, headers={**self.headers, "User-Agent": "soda"}
        )

    def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        """A GET answered from the ETag cache when the forge says nothing changed."""
        return self.request("GET", path, params=params)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: dict[str, Any] | None = None,
        url: str | None = None,
    ) -> Any:
        target = url or self.base_url.rstrip("/") + path
        key = str(httpx.URL(target, params=params)) if method == "GET" else None
        cached = rows.etag(self.db, key) if key else None
        headers = {"Authorization": f"Bearer {self.token}"}
        if cached:
            headers["If-None-Match"] = cached[0]
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._client.request(
                    method, target, json=body, params=params, headers=headers
                )
            except httpx.HTTPError as exc:
                problem = f"{method} {path}: {type(exc).__name__}"
                self._wait_or_raise(attempt, 2.0**attempt, problem)
                continue
            status = response.status_code
            if status == 304 and cached:
                return json.loads(cached[1])
            if 200 <= status < 300:
                if status == 204 or not response.content:
                    return None
                try:
                    data = response.json()
                except ValueError as exc:
                    raise UserError(
                        f"forge: {method} {path} did not answer JSON; is forge.api_url"
                        " the API of the forge forge.kind names?"
                    ) from exc
                tag = response.headers.get("etag")
                if key and tag:
                    rows.keep_etag(self.db, key, tag, response.text)
                return data
            wait = self._retry_after(response)
            if wait is not None:
                self._wait_or_raise(attempt, wait, f"{method} {path}: {_reason(response)}")
                continue
            raise self._failure(method, path, response)

    def _wait_or_raise(self, attempt: int, wait: float, problem: str) -> None:
        if attempt > self.max_retries:
            raise TransientError(f"forge: {problem} (gave up after {attempt} tries)")
        self.clock.sleep(min(max(wait, 0.0), self.max_retry_wait))

    def _retry_after(self, response: httpx.Response) -> float | None:
        """Seconds to wait before trying again, or None when trying again cannot help."""
        status = response.status_code
        headers = response.headers
        limited = status == 429 or (
            status == 403
            and (headers.get("x-ratelimit-remaining") == "0" or "retry-after" in headers)
        )
        if not (limited or status >= 500):
            return None
        if "retry-after" in headers:
            return _seconds(headers["retry-after"], self.clock)
        reset = headers.get("x-ratelimit-reset")
        if limited and reset and reset.isdigit():
            return max(0.0, int(reset) - _now(self.clock))
        return 1.0 if limited else 2.0

    def _failure(self, method: str, path: str, response: httpx.Response) -> Exception:
        status = response.status_code
        reason = _reason(response)
        if status in (401, 403):
            return CredentialsError(
                f"forge: the token in ${self.token_env} was refused ({status} on {method}"
                f" {path}: {reason}); give it the permissions the README's 'Pull requests'"
                " section lists"
            )
        if status == 404:
            return UserError(
                f"forge: {method} {path} answered 404: the repository (forge.repository)"
                f" or pull request does not exist, or the token in ${self.token_env}"
                " cannot see it"
            )
        if status == 422:
            return ForgeRefused(f"forge: {method} {path} refused (422): {reason}", _json(response))
        return UserError(f"forge: {method} {path} answered {status}: {reason}")


def _reason(response: httpx.Response) -> str:
    data = _json(response)
    message = data.get("message") if isinstance(data, dict) else None
    if isinstance(data, dict) and isinstance(data.get("errors"), list):
        details = [e.get("message") for e in data["errors"] if isinstance(e, dict)]
        message = "; ".join(str(m) for m in [message, *details] if m)
    text = str(message or response.reason_phrase or response.status_code)
    return " ".join(text.split())[:MAX_ERROR_CHARS]


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _seconds(value: str, clock: Clock) -> float:
    """Retry-After: seconds, or an HTTP date."""
    try:
        return float(value)
    except ValueError:
        try:
            then = parsedate_to_datetime(value).timestamp()
        except (TypeError, ValueError):
            return 1.0
        return max(0.0, then - _now(clock))


def _now(clock: Clock) -> float:
    """The clock's wall time as a Unix timestamp."""
    return datetime.fromisoformat(clock.now()).timestamp()
