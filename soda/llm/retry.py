"""The one place soda retries a failed model call: bounded exponential backoff.

Providers translate their SDK's failures into soda's errors and hand the call to
`call_with_retries`. A `TransientError` is retried with full-jitter exponential
backoff (base 1 s, cap 60 s), waiting at least as long as the server asked
through `retry-after`, while two budgets last: a number of retries and a total
time spent waiting. Every retry is announced as a `provider.retry` event. Any
other error passes straight through, because retrying cannot fix it. SDKs'
own retry loops must be switched off, or the two policies would multiply.

A rate limit (HTTP 429) whose answer says when it resets, and that outlasts
these budgets, is not a transient failure: it comes out as `ProviderLimit`, and
the agent runner waits it out without a model call (soda.agent.quota). A reset
further away than LONGEST_LIMIT is not believed: a plain transient failure.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from soda.errors import ProviderLimit, TransientError
from soda.llm.base import EventSink

T = TypeVar("T")

BASE_WAIT = 1.0
"""Seconds of the first backoff step; each further attempt doubles it."""
MAX_WAIT = 60.0
"""Cap on one backoff step (a server's retry-after may ask for longer)."""
LONGEST_LIMIT = 7 * 86_400.0
"""Seconds: the furthest reset of a provider's rate limit soda waits for (a week)."""


class RetryableError(TransientError):
    """A transient failure of one attempt, with the wait the server asked for.
    Raised by providers, consumed by `call_with_retries`; callers above the
    provider only ever see the TransientError it raises once the budget is spent."""

    def __init__(
        self, message: str, retry_after: float | None = None, rate_limited: bool = False
    ) -> None:
        self.retry_after = retry_after
        self.rate_limited = rate_limited
        """The provider refused for a rate limit (HTTP 429): `retry_after` is its reset."""
        super().__init__(message)


def call_with_retries(
    fn: Callable[[], T],
    *,
    max_retries: int,
    max_total_wait: float,
    emit: EventSink,
    describe: str,
    sleep: Callable[[float], None] = time.sleep,
    rng: Callable[[], float] = random.random,
) -> T:
    """Call `fn` until it succeeds, retrying TransientErrors within the budgets.

    `describe` names the call in events and in the final error. Raises a plain
    TransientError (chained to the last failure) when either budget is spent.
    """
    started = time.monotonic()
    waited = 0.0
    attempt = 0
    while True:
        attempt += 1
        try:
            return fn()
        except TransientError as exc:
            retry_after = getattr(exc, "retry_after", None)
            remaining = max_total_wait - waited
            why_stop = _why_stop(attempt, max_retries, remaining, retry_after)
            if why_stop is not None:
                elapsed = time.monotonic() - started
                limit = _limit(exc, retry_after, describe, why_stop)
                if limit is not None:
                    raise limit from exc
                raise TransientError(
                    f"{describe}: gave up after {attempt} attempt(s) over {elapsed:.1f}s "
                    f"({why_stop}); last error: {exc}"
                ) from exc
            wait = min(max(backoff(attempt, rng), retry_after or 0.0), remaining)
            emit(
                "provider.retry",
                {
                    "call": describe,
                    "attempt": attempt,
                    "wait_seconds": round(wait, 3),
                    "reason": str(exc),
                },
            )
            sleep(wait)
            waited += wait


def _limit(
    exc: TransientError, retry_after: float | None, describe: str, why_stop: str
) -> ProviderLimit | None:
    """The provider's rate limit to wait out, when the failure was one that said
    when it resets (within LONGEST_LIMIT)."""
    if not getattr(exc, "rate_limited", False) or retry_after is None:
        return None
    if retry_after > LONGEST_LIMIT:
        return None
    return ProviderLimit(
        f"{describe}: the provider's rate limit resets in {retry_after:.0f}s ({why_stop});"
        f" last error: {exc}",
        retry_after,
    )


def backoff(attempt: int, rng: Callable[[], float] = random.random) -> float:
    """Full jitter: a uniform draw below the capped exponential step, so clients
    that failed together do not come back together."""
    return rng() * min(MAX_WAIT, BASE_WAIT * 2.0 ** (attempt - 1))


def _why_stop(
    attempt: int, max_retries: int, remaining: float, retry_after: float | None
) -> str | None:
    """Why no retry should follow failed attempt number `attempt`, or None to retry."""
    if attempt > max_retries:
        return f"max_retries = {max_retries} spent"
    if remaining <= 0:
        return "retry wait budget spent"
    # Coming back sooner than the server asked only earns another refusal.
    if retry_after is not None and retry_after > remaining:
        return (
            f"the server asked to wait {retry_after:.1f}s, more than the "
            f"{remaining:.1f}s of retry wait budget left"
        )
    return None
