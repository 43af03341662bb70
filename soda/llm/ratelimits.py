"""What a provider's answer says about when to ask again: the headers, read.

Only the answer's headers count (a structural signal): `retry-after-ms` or
`retry-after` (seconds) on any retryable answer, and on a rate limit (HTTP 429)
the reset of the limit that is spent: Anthropic's `anthropic-ratelimit-*-reset`
(RFC 3339 times; counted from the answer's `date`, so a client clock that is
off does not shorten the wait), OpenAI's `x-ratelimit-reset-*` (durations such as
`1s`, `6m0s`, `20ms`). A limit whose `-remaining` says it is not spent is not
waited for; with no remaining counts at all, the latest reset is.
"""

from __future__ import annotations

import math
import re
import time
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

ANTHROPIC_LIMITS = ("requests", "tokens", "input-tokens", "output-tokens")
OPENAI_LIMITS = ("requests", "tokens")
DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def retry_after(headers: Any) -> float | None:
    """Seconds the server asked us to wait: `retry-after-ms`, else `retry-after`
    in seconds; None when absent or in a form we do not read (an HTTP date)."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            continue
        if math.isfinite(seconds) and seconds >= 0:
            return seconds
    return None


def anthropic_wait(headers: Any) -> float | None:
    """Seconds until a 429 may be retried: `retry-after`, else the reset of the
    spent `anthropic-ratelimit-*` limit, counted from the answer's `date`."""
    asked = retry_after(headers)
    if asked is not None:
        return asked
    now = _answered_at(headers)
    resets = {
        name: _rfc3339(headers.get(f"anthropic-ratelimit-{name}-reset"))
        for name in ANTHROPIC_LIMITS
    }
    remaining = {name: headers.get(f"anthropic-ratelimit-{name}-remaining") for name in resets}
    return _latest_spent(resets, remaining, now)


def openai_wait(headers: Any) -> float | None:
    """Seconds until a 429 may be retried: `retry-after`, else the reset of the
    spent `x-ratelimit-*` limit (a duration from now)."""
    asked = retry_after(headers)
    if asked is not None:
        return asked
    resets = {name: _duration(headers.get(f"x-ratelimit-reset-{name}")) for name in OPENAI_LIMITS}
    remaining = {name: headers.get(f"x-ratelimit-remaining-{name}") for name in resets}
    return _latest_spent(resets, remaining, 0.0)


def _latest_spent(
    resets: dict[str, float | None], remaining: dict[str, Any], now: float
) -> float | None:
    """The latest reset among the spent limits (remaining 0), or among all when
    none says how much remains; seconds from `now`, never negative."""
    known = {name: at for name, at in resets.items() if at is not None}
    said = {name for name in known if remaining.get(name) is not None}
    spent = [at for name, at in known.items() if name in said and str(remaining[name]) == "0"]
    chosen = spent if said else list(known.values())
    if not chosen:
        return None
    return max(0.0, max(chosen) - now)


def _answered_at(headers: Any) -> float:
    """When the answer was sent, by its `date` header (else our clock)."""
    try:
        return parsedate_to_datetime(str(headers.get("date"))).timestamp()
    except (TypeError, ValueError, IndexError):
        return time.time()


def _rfc3339(value: Any) -> float | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _duration(value: Any) -> float | None:
    """`6m0s`, `1.5s`, `20ms`, `1h2m` as seconds; None when not one."""
    text = str(value or "").strip()
    parts = DURATION.findall(text)
    if not parts or "".join(n + unit for n, unit in parts) != text:
        return None
    scale = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    return sum(float(n) * scale[unit] for n, unit in parts)
