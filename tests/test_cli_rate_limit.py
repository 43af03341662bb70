"""A coding CLI meets the provider's spent rate limit: soda reads it from structure
only (the egress proxy's view of the 429's headers, Claude Code's
`rate_limit_event`, Codex's usage-limit error event), ends the CLI, lets no call
out until the reset, and runs the task again on its worktree."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from soda.agent.backends.claude_code import CLAUDE_CODE
from soda.agent.backends.codex import CODEX
from soda.agent.backends.port import Transcript
from tests.cli_executors import cli_project, outcome, run_once, scripted
from tests.fakestream import Seen, Step, StreamAPI, status
from tests.test_cli_executor_faults import NOTE, nothing_left

RESET_S = 4.0
"""Seconds the stand-in's limit stays spent: real time, kept short."""

# Claude Code's stream-json line as it prints it (2.x), the limit spent.
REJECTED = (
    '{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1784979600,'
    '"rateLimitType":"five_hour","overageStatus":"rejected","isUsingOverage":false},'
    '"uuid":"5b0e2a7c-4a52-4a4b-9f43-0d6c0b6f1e2a","session_id":"0f9c2a4e-1d2b-4c5a-8e7f-3a1b2c3d4e5f"}'
)


def test_claude_codes_rate_limit_event_rejected_is_a_limit_and_allowed_is_not() -> None:
    transcript = Transcript()
    assert CLAUDE_CODE.read(json.loads(REJECTED), transcript) == []
    assert transcript.limited_until == 1784979600.0
    allowed = json.loads(REJECTED.replace('"status":"rejected"', '"status":"allowed_warning"'))
    fresh = Transcript()
    CLAUDE_CODE.read(allowed, fresh)
    assert fresh.limited_until is None
    # Text that talks about limits is only text: a tool's output, the model's words.
    said = {
        "type": "assistant",
        "message": {"content": [{"type": "text", "text": "HTTP 429: usage limit reached"}]},
    }
    result = {
        "type": "user",
        "message": {"content": [{"type": "tool_result", "content": REJECTED}]},
    }
    for event in (said, result):
        CLAUDE_CODE.read(event, fresh)
    assert fresh.limited_until is None


def test_codexs_usage_limit_error_is_a_limit_and_its_other_errors_are_not() -> None:
    message = (
        "You've hit your usage limit. To get more access now, send a request to your admin"
        " or try again in 2 hours 5 minutes."
    )
    transcript = Transcript()
    before = time.time()
    CODEX.read({"type": "error", "message": message}, transcript)
    assert transcript.limited_until is not None
    assert 7500 <= transcript.limited_until - before <= 7501
    failed = Transcript()
    CODEX.read({"type": "turn.failed", "error": {"message": message}}, failed)
    assert failed.limited_until is not None and failed.done
    for text in ("exceeded retry limit, last status: 429 Too Many Requests", "stream error"):
        other = Transcript()
        CODEX.read({"type": "error", "message": text}, other)
        assert other.limited_until is None
    item = {"type": "item.completed", "item": {"type": "agent_message", "text": message}}
    said = Transcript()
    CODEX.read(item, said)
    assert said.limited_until is None  # the model's words are not Codex's error


class SpentLimit:
    """The stand-in API's behaviour: the first model call spends the limit for
    RESET_S; until then every call gets a 429 saying when it resets (in the
    headers of the API the CLI speaks); afterwards the task is scripted."""

    def __init__(self) -> None:
        self.then = scripted(NOTE)
        self.until: float | None = None
        self.calls: list[tuple[float, int]] = []
        self._lock = threading.Lock()

    def __call__(self, seen: Seen) -> Step:
        now = time.time()
        with self._lock:
            if self.until is None:
                self.until = now + RESET_S
            limited = now < self.until
            self.calls.append((now, 429 if limited else 200))
        if not limited:
            return self.then(seen)
        assert self.until is not None
        if seen.path.startswith("/v1/messages"):
            reset = datetime.fromtimestamp(self.until, UTC).isoformat().replace("+00:00", "Z")
            headers = {
                "anthropic-ratelimit-requests-remaining": "0",
                "anthropic-ratelimit-requests-reset": reset,
            }
        else:
            left = max(1, round(self.until - now))
            headers = {
                "x-ratelimit-remaining-requests": "0",
                "x-ratelimit-reset-requests": f"{left}s",
            }
        return status(429, headers)


@pytest.mark.parametrize("backend", ["claude-code", "codex"])
def test_a_cli_meeting_a_spent_limit_waits_with_no_call_then_does_its_task(
    tmp_path: Path, backend: str
) -> None:
    behaviour = SpentLimit()
    api = StreamAPI(behaviour).start()
    try:
        settings = {"max_retry_wait = 120.0": "max_retry_wait = 1.0"}
        root = cli_project(tmp_path, backend, api, settings)
        session = run_once(root)
        assert outcome(session) == "merged"
        assert behaviour.until is not None
        refused = [at for at, code in behaviour.calls if code == 429]
        assert len(refused) == 1, behaviour.calls  # the proxy let no other call out
        later = [at for at, code in behaviour.calls if code == 200]
        assert later and min(later) >= behaviour.until
        kinds = [r["kind"] for r in session.db["events"].rows_where(order_by="id")]
        assert kinds.count("executor.start") == 2
        assert "executor.rate_limited" in kinds
        waited = kinds.index("provider.waiting")
        assert kinds.index("provider.resumed") > waited
        assert waited < len(kinds) - 1 - kinds[::-1].index("executor.start")
        (row,) = session.db["events"].rows_where("kind = 'provider.waiting'")
        data = json.loads(row["data_json"])
        assert data["agent"] == f"executor:{backend}" and data["until"]
        nothing_left(tmp_path, backend)
        session.finish_run("done", "test")
    finally:
        api.close()
