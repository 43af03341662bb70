"""A provider's rate limit that outlasts the retry budget is waited out with no model
call: the stand-in Messages API spends its limit for 40 s (on a fake clock the
server and soda share, so the 40 s take no real time), `soda status` says soda
waits for it, and the run goes on with the same agent and task to DONE. Only the
provider's answer counts: "429" or "rate limit" in a tool's output is just text."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from soda.agent.quota import wait_out
from soda.cli.demo import prepare
from soda.config import load
from soda.errors import Interrupted, ProviderLimit
from soda.llm.ratelimits import anthropic_wait, openai_wait
from soda.llm.retry import RetryableError, call_with_retries
from soda.loop.run import Ending, run_loop
from soda.loop.session import Session
from tests.conftest import wait_for
from tests.fakeapi import FakeAPI, limit_window
from tests.test_loop_anthropic import DEMO, configure, wire

pytest_plugins = ("tests.fakeapi",)

LIMIT_S = 40.0


class FakeClock:
    """soda's Clock and the stand-in API's time at once: it starts at the real
    time, and only a sleep moves it (at once, so a 40 s wait takes none).
    `on_sleep` runs before each sleep, inside the wait."""

    def __init__(self, on_sleep: Callable[[], None] = lambda: None) -> None:
        self.seconds = time.time()
        self.slept = 0.0
        self.on_sleep = on_sleep
        self._lock = threading.Lock()

    def epoch(self) -> float:
        with self._lock:
            return self.seconds

    def now(self) -> str:
        return datetime.fromtimestamp(self.epoch(), UTC).isoformat(timespec="milliseconds")

    def monotonic(self) -> float:
        return self.epoch()

    def sleep(self, seconds: float) -> None:
        self.on_sleep()
        with self._lock:
            self.seconds += seconds
            self.slept += seconds


@pytest.fixture
def root(tmp_path: Path, fake_api: FakeAPI, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-real")
    project = tmp_path / "project"
    prepare(project)
    configure(project, fake_api)
    return project


def soda_status(root: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "soda", "status"], cwd=root, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_spent_rate_limit_is_waited_out_with_no_call_then_the_same_task_goes_on(
    root: Path, fake_api: FakeAPI
) -> None:
    said: list[str] = []
    calls_while_waiting: list[int] = []
    real: list[float] = []

    def look() -> None:  # inside the wait: what a person sees, and what the API got
        if not said:
            said.append(soda_status(root))
        calls_while_waiting.append(len(fake_api.requests))
        real.append(time.monotonic())

    clock = FakeClock(look)
    fake_api.clock = clock.epoch
    # The executor's second turn meets a limit spent for 40 s.
    fake_api.enqueue(*[wire(e) for e in DEMO[:6]], limit_window(LIMIT_S))
    fake_api.enqueue(*[wire(e) for e in DEMO[6:]])
    session = Session.open(load(root / "soda.toml"), clock=clock)
    result = run_loop(session, lambda line: None)

    assert result.ending is Ending.DONE, result.reason
    assert clock.slept >= LIMIT_S and len(real) >= LIMIT_S
    assert real[-1] - real[1] < 10  # the 40 s passed on the fake clock, not the real one
    # One refused request, then nothing until the reset: the next came after it.
    # (The fake clock stands still between sleeps: the first calls share its time.)
    reset_at = fake_api.limited_until or 0
    assert len(fake_api.requests) == len(DEMO) + 1
    before, after = fake_api.requests[:7], fake_api.requests[7:]
    assert all(r.at < reset_at for r in before) and all(r.at >= reset_at for r in after)
    refused = before[-1]
    assert set(calls_while_waiting) == {7}  # the 6 answered calls and the 429
    # While it waited, `soda status` said so, naming when.
    waiting = session.db.execute(
        "SELECT json_extract(data_json, '$.until'), json_extract(data_json, '$.agent')"
        " FROM events WHERE kind = 'provider.waiting'"
    ).fetchall()
    assert len(waiting) == 1 and waiting[0][1] == "executor"
    until = waiting[0][0]
    now_line = next(line for line in said[0].splitlines() if line.startswith("now:"))
    assert now_line.endswith(f"waiting for the provider's limit until {until}"), said[0]
    assert "iteration 1, phase act, executor" in now_line
    reset = datetime.fromisoformat(until).timestamp()
    assert abs(reset - (refused.at + LIMIT_S)) <= 1.5
    # The same iteration's executor went on with its task: the work merged in
    # iteration 1, DONE confirmed in iteration 2; no call was lost or repeated.
    outcomes = session.db.execute("SELECT number, outcome FROM iterations ORDER BY number")
    assert [tuple(r) for r in outcomes] == [(1, "merged"), (2, "done")]
    assert session.db.execute("SELECT count(*) FROM agent_calls").fetchone()[0] == len(DEMO)
    assert "waiting for the provider" not in soda_status(root)


def test_a_tool_output_or_a_file_saying_429_or_rate_limit_changes_nothing(
    root: Path, fake_api: FakeAPI
) -> None:
    text = "HTTP 429 Too Many Requests: rate_limit_error; usage limit reached; retry-after: 40"
    (root / "NOTES.md").write_text(text + "\n")
    subprocess.run(["git", "add", "NOTES.md"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", "notes"], cwd=root, check=True)
    shout = {
        "agent": "executor",
        "tool_calls": [
            {"name": "run_command", "input": {"command": f"echo '{text}'", "timeout_seconds": 60}},
            {
                "name": "read_file",
                "input": {"path": "NOTES.md", "offset_line": None, "max_lines": None},
            },
        ],
    }
    fake_api.enqueue(*[wire(e) for e in [*DEMO[:6], shout, *DEMO[6:]]])
    session = Session.open(load(root / "soda.toml"))
    result = run_loop(session, lambda line: None)
    assert result.ending is Ending.DONE, result.reason
    assert len(fake_api.requests) == len(DEMO) + 1
    results = json.dumps(fake_api.requests[7].body["messages"][-1])
    assert "HTTP 429 Too Many Requests" in results  # the executor did see the text
    kinds = {r[0] for r in session.db.execute("SELECT kind FROM events")}
    assert not kinds & {"provider.waiting", "provider.retry"}


def test_the_reset_read_from_anthropic_and_openai_headers() -> None:
    date = "Sat, 28 Nov 2026 04:00:00 GMT"
    spent = {
        "date": date,
        "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": "2026-11-28T04:00:40Z",
        "anthropic-ratelimit-tokens-remaining": "5000",
        "anthropic-ratelimit-tokens-reset": "2026-11-28T04:05:00Z",
    }
    assert anthropic_wait(spent) == 40.0  # the spent limit's, counted from `date`
    assert anthropic_wait({**spent, "retry-after": "12"}) == 12.0
    unsaid = {"date": date, "anthropic-ratelimit-output-tokens-reset": "2026-11-28T04:01:00Z"}
    assert anthropic_wait(unsaid) == 60.0
    assert anthropic_wait({"date": date}) is None
    spent_requests = {
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "6m0s",
        "x-ratelimit-remaining-tokens": "9",
        "x-ratelimit-reset-tokens": "9h",
    }
    assert openai_wait(spent_requests) == 360.0
    assert openai_wait({"x-ratelimit-reset-tokens": "20ms"}) == pytest.approx(0.02)
    assert openai_wait({"x-ratelimit-reset-tokens": "soon"}) is None


def test_only_a_rate_limit_that_says_when_outlasting_the_budget_is_waited_out() -> None:
    def fails(exc: Exception) -> Callable[[], Any]:
        def call() -> Any:
            raise exc

        return call

    def attempt(exc: Exception) -> Exception:
        with pytest.raises(Exception) as caught:
            call_with_retries(
                fails(exc), max_retries=2, max_total_wait=3, emit=lambda *a: None,
                describe="agent x", sleep=lambda s: None,
            )  # fmt: skip
        return caught.value

    limit = attempt(RetryableError("HTTP 429", 40.0, rate_limited=True))
    assert isinstance(limit, ProviderLimit) and limit.seconds == 40.0
    for other in (
        RetryableError("HTTP 429 without a reset", None, rate_limited=True),
        RetryableError("HTTP 529 overloaded", 40.0),
        RetryableError("HTTP 429 in a year", 365 * 86_400.0, rate_limited=True),
    ):
        assert not isinstance(attempt(other), ProviderLimit), other


def test_the_wait_ends_at_a_stop_and_makes_no_call() -> None:
    events: list[tuple[str, dict[str, Any]]] = []
    clock = FakeClock()
    asks = iter([False, False, True])
    with pytest.raises(Interrupted, match="waiting for the provider's limit"):
        wait_out(
            3600,
            "HTTP 429",
            "planner",
            clock,
            lambda: next(asks),
            lambda k, d: events.append((k, d)),
        )
    assert [k for k, _ in events] == ["provider.waiting", "provider.resumed"]
    assert events[1][1]["stopped"] is True and clock.slept == 2.0


def test_the_wall_time_limit_ends_a_wait_for_the_provider_stuck(
    root: Path, fake_api: FakeAPI
) -> None:
    """An hour's limit, waited on the real clock; the run's wall-time limit passes
    during the wait (started once the wait began, so a loaded machine cannot reach
    it first): the wait ends at once, the run STUCK naming the key, no call made."""
    fake_api.enqueue(limit_window(3600))
    session = Session.open(load(root / "soda.toml"))
    results: list[Any] = []
    loop = threading.Thread(target=lambda: results.append(run_loop(session, lambda line: None)))
    loop.start()
    try:
        wait_for(lambda: "waiting for the provider" in soda_status(root), 120, "the wait")
        session.wall.start(0.5, stopping=False)
    finally:
        loop.join(60)
    (result,) = results
    assert result.ending is Ending.STUCK
    assert "budget.max_wall_seconds = 0.5 s" in result.reason
    assert len(fake_api.requests) == 1
    kinds = [r[0] for r in session.db.execute("SELECT kind FROM events ORDER BY id")]
    assert kinds.index("provider.waiting") < kinds.index("provider.resumed")
    assert "waiting for the provider" not in soda_status(root)
