"""What ACT's task threads record through shared objects: the session's model
call recorder behind a lock, and the skips of the cascade as they happen."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from soda.llm.base import ModelRequest, ModelResponse
from soda.loop.act.execute import TaskOutcome
from soda.loop.context import Iteration
from soda.loop.session import Session


class LockedRecorder:
    """The session's recorder behind a lock: the iteration's totals, the budget
    check and the events it writes are shared by every task's runner. Every
    method of the recorder is reached through the lock."""

    def __init__(self, recorder: Any) -> None:
        self._recorder = recorder
        self._lock = threading.RLock()

    def __call__(
        self,
        agent: str,
        response: ModelResponse,
        turn: int,
        request: ModelRequest | None = None,
        provider: str | None = None,
        endpoint: str | None = None,
    ) -> None:
        with self._lock:
            if provider is None:
                self._recorder(agent, response, turn, request)
            else:
                self._recorder(agent, response, turn, request, provider, endpoint)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._recorder, name)
        if not callable(attribute):
            return attribute

        def locked(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attribute(*args, **kwargs)

        return locked


def skipped_recorder(session: Session, it: Iteration) -> Callable[[TaskOutcome], None]:
    """Records a skip as it happens: an `act.task.skipped` event and a Trace comment."""

    def record(outcome: TaskOutcome) -> None:
        task = outcome.task
        it.events.emit(
            "act.task.skipped",
            {"plan": it.number, "key": task.id, "task_id": task.task_id, "reason": outcome.reason},
        )
        if task.task_id is not None:
            session.tracker.comment(task.task_id, "soda", f"skipped: {outcome.reason}", it.id)

    return record
