"""call_with_retries: backoff, retry-after, both budgets, and what is never retried.
Waits are recorded by an injected sleep, so nothing here really sleeps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from soda.errors import StructuralError, TransientError
from soda.llm.retry import MAX_WAIT, RetryableError, backoff, call_with_retries


class Flaky:
    """Fails with the given errors in order, then returns "ok"."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


class Recorder:
    """Collects the waits and events of one call_with_retries run, even when it raises."""

    def __init__(self) -> None:
        self.waits: list[float] = []
        self.events: list[dict[str, Any]] = []

    def emit(self, kind: str, data: dict[str, Any]) -> None:
        assert kind == "provider.retry"
        self.events.append(data)

    def run(
        self,
        fn: Callable[[], str],
        *,
        max_retries: int = 4,
        max_total_wait: float = 120.0,
        rng: Callable[[], float] = lambda: 0.5,
    ) -> str:
        return call_with_retries(
            fn,
            max_retries=max_retries,
            max_total_wait=max_total_wait,
            emit=self.emit,
            describe="agent test (model-x)",
            sleep=self.waits.append,
            rng=rng,
        )


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


def test_success_needs_no_retry(recorder: Recorder) -> None:
    assert recorder.run(Flaky()) == "ok"
    assert recorder.waits == [] and recorder.events == []


def test_transient_failures_back_off_exponentially_and_are_announced(recorder: Recorder) -> None:
    fn = Flaky(RetryableError("HTTP 529 overloaded_error"), TransientError("timed out"))
    assert recorder.run(fn, rng=lambda: 0.5) == "ok"
    assert fn.calls == 3
    assert recorder.waits == [0.5, 1.0]  # half of 1 s, then half of 2 s
    assert recorder.events == [
        {
            "call": "agent test (model-x)",
            "attempt": 1,
            "wait_seconds": 0.5,
            "reason": "HTTP 529 overloaded_error",
        },
        {"call": "agent test (model-x)", "attempt": 2, "wait_seconds": 1.0, "reason": "timed out"},
    ]


def test_backoff_is_full_jitter_under_a_cap() -> None:
    assert backoff(1, rng=lambda: 1.0) == 1.0
    assert backoff(4, rng=lambda: 1.0) == 8.0
    assert backoff(30, rng=lambda: 1.0) == MAX_WAIT
    assert backoff(30, rng=lambda: 0.0) == 0.0


def test_retry_after_is_a_floor_on_the_wait(recorder: Recorder) -> None:
    recorder.run(Flaky(RetryableError("HTTP 429", retry_after=7.0)), rng=lambda: 0.1)
    assert recorder.waits == [7.0]


def test_retry_after_beyond_the_budget_gives_up_at_once(recorder: Recorder) -> None:
    fn = Flaky(RetryableError("HTTP 429 rate_limit_error", retry_after=300.0))
    with pytest.raises(TransientError, match=r"asked to wait 300\.0s") as caught:
        recorder.run(fn, max_total_wait=120.0)
    assert fn.calls == 1 and recorder.waits == []
    assert "HTTP 429 rate_limit_error" in str(caught.value)


def test_attempt_budget_spent_raises_transient_with_count_and_last_reason(
    recorder: Recorder,
) -> None:
    fn = Flaky(*(RetryableError(f"HTTP 500 failure {n}") for n in range(10)))
    with pytest.raises(TransientError) as caught:
        recorder.run(fn, max_retries=3)
    message = str(caught.value)
    assert fn.calls == 4 and len(recorder.events) == 3
    assert "gave up after 4 attempt(s)" in message
    assert "max_retries = 3 spent" in message
    assert message.endswith("last error: HTTP 500 failure 3")
    assert isinstance(caught.value.__cause__, RetryableError)
    assert not isinstance(caught.value, RetryableError)


def test_total_wait_is_bounded_by_the_wait_budget(recorder: Recorder) -> None:
    fn = Flaky(*(TransientError("timed out") for _ in range(10)))
    with pytest.raises(TransientError, match="retry wait budget spent"):
        recorder.run(fn, max_retries=10, max_total_wait=2.5, rng=lambda: 1.0)
    assert recorder.waits == [1.0, 1.5]  # the 2 s step is cut to what was left
    assert fn.calls == 3


def test_zero_retries_means_one_attempt(recorder: Recorder) -> None:
    fn = Flaky(TransientError("HTTP 529"))
    with pytest.raises(TransientError, match="gave up after 1 attempt"):
        recorder.run(fn, max_retries=0)
    assert fn.calls == 1


@pytest.mark.parametrize("error", [StructuralError("HTTP 400"), ValueError("a bug")])
def test_other_errors_pass_straight_through(recorder: Recorder, error: Exception) -> None:
    fn = Flaky(error)
    with pytest.raises(type(error)) as caught:
        recorder.run(fn)
    assert caught.value is error
    assert fn.calls == 1 and recorder.events == []
