"""The retrier's answer (contract `retry`): a failed task described anew."""

from __future__ import annotations

from soda.contracts.base import Contract


class RetryAdvice(Contract):
    """How to try a failed task again, given through the `submit` tool."""

    description: str
    """The task's description rewritten for the next attempt: what to do, and how
    this attempt should differ from the one that failed."""
    reason: str
    """Why the last attempt failed and why the new approach should not, in one or
    two sentences (recorded on the task)."""
