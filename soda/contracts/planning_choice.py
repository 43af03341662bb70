"""The planning-mode decider's answer (contract `planning_choice`): is a
multi-task plan worth it this iteration, or one task?"""

from __future__ import annotations

from soda.contracts.base import Contract


class PlanningChoice(Contract):
    """Whether this iteration's work calls for a plan of several tasks."""

    multi_task: bool
    """true when the work at hand has several separable parts worth a plan of
    tasks with dependencies; false when one focused task is enough."""
    reason: str
    """One sentence: what in the work at hand decided it."""
