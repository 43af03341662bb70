"""Smart retry: a failed task described anew by the retrier (agents/retrier.md).

The retrier reads the failure (its kind, the executor's reason or the gate's
verdict, the failing tests with their first lines, the diff stat of the failed
attempt, the executor's summary) and rewrites the task's description for one
more attempt on a fresh worktree. A retrier that gives up in an ordinary way
(`ModelGaveUp`) means no retry: the task fails as it stood. A contract
violation stays structural (HALT), as for every agent. A merge refused for its
target tests is also told to the next attempt itself (`refusal_note`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from soda.agent.definition import load_agent
from soda.agent.runtime import AgentRunner
from soda.contracts import PlanTask, RetryAdvice
from soda.contracts.outcomes import AttemptStatus
from soda.errors import ModelGaveUp

MAX_FAILURE_LINES = 12
"""Lines kept of each failing test's output."""
MAX_FAILING = 10
MAX_TEXT = 4000
REFUSAL_NOTE_CHARS = 2000
"""Characters of the failing target tests' output a retried attempt is told."""


@dataclass
class Failure:
    """What went wrong with one attempt, as the retrier reads it."""

    kind: AttemptStatus
    """One of `outcomes.RETRYABLE`: gave_up, gate_failed, targets_failed or conflict."""
    reason: str
    failing: dict[str, str] = field(default_factory=dict)
    diffstat: str = ""
    summary: str = ""

    def render(self) -> str:
        lines = [f"kind: {self.kind}", f"reason: {_clip(self.reason)}"]
        if self.failing:
            lines.append("failing tests:")
            for name, text in list(self.failing.items())[:MAX_FAILING]:
                head = "\n".join(text.strip().splitlines()[:MAX_FAILURE_LINES])
                lines.append(f"- {name}" + (f"\n{head}" if head else ""))
        if self.diffstat:
            lines.append(f"diff stat of the attempt:\n{_clip(self.diffstat)}")
        if self.summary:
            lines.append(f"the executor's summary: {_clip(self.summary)}")
        return "\n".join(lines)


def advise(runner: AgentRunner, task: PlanTask, failure: Failure) -> RetryAdvice | None:
    """The retrier's new description, or None when it could not give one."""
    try:
        answer = runner.run(
            load_agent("retrier", RetryAdvice),
            {"task": task.model_dump(mode="json"), "failure": failure.render()},
            None,
        )
    except ModelGaveUp:
        return None
    return answer.output


def refusal_note(status: AttemptStatus, reason: str, failing: dict[str, str]) -> list[str]:
    """What the next attempt is told of a merge refused for its target tests (as a
    note beside the rewritten description): the gate's reason and each target's
    output, as the retrier read them. Nothing for other failures."""
    if status != AttemptStatus.TARGETS_FAILED:
        return []
    shown = "\n".join(f"- {name}: {text.strip()}" for name, text in failing.items())
    return [
        f"The last attempt was refused, not merged: {reason}. The target tests must pass "
        f"on the merged tree:\n{shown[:REFUSAL_NOTE_CHARS]}"
    ]


def _clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + " [...]"
