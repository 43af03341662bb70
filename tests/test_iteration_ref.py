"""One iteration's identity is passed down, never left on a shared object.

Two iterations run back to back on a real project (real git, real SQLite, the
real gate); the model is a behavioural fake that also reports a provider retry
through the request's own event sink, as a real provider does. Every event and
every model call of an iteration is recorded against that iteration, nothing of
one leaks into the other, and the run's own services hold no iteration at all.
"""

from __future__ import annotations

from pathlib import Path

from soda.llm.base import ModelRequest, ModelResponse
from soda.llm.function import FunctionModel
from soda.loop.run import run_iteration
from tests.plan_fakes import fake_model, new_project, open_session, plan, task


class RetryingModel:
    """The fake, reporting one retry per request the way providers do: to the sink
    the request carries."""

    provider = "function"

    def __init__(self, inner: FunctionModel) -> None:
        self.inner = inner

    def complete(self, request: ModelRequest) -> ModelResponse:
        assert request.on_event is not None, "the runner hands every request its sink"
        request.on_event("provider.retry", {"agent": request.agent, "attempt": 1})
        return self.inner.complete(request)


def test_each_iteration_records_its_own_events_and_calls(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    model = RetryingModel(fake_model(plan(task("a"))))
    session = open_session(root, model)  # type: ignore[arg-type]
    first = run_iteration(session, lambda line: None)
    second = run_iteration(session, lambda line: None)
    ids = dict(session.db.execute("SELECT number, id FROM iterations").fetchall())
    assert set(ids) == {first.number, second.number}

    for number in (first.number, second.number):
        rows = session.db.execute(
            "SELECT kind FROM events WHERE iteration_id = ? ORDER BY id", [ids[number]]
        ).fetchall()
        kinds = [kind for (kind,) in rows]
        assert kinds[0] == "iteration.start"
        for expected in ("sense.start", "orient.start", "decide.done", "provider.retry"):
            assert expected in kinds, (number, expected, kinds)
        calls = session.db.execute(
            "SELECT count(*) FROM agent_calls WHERE iteration_id = ?", [ids[number]]
        ).fetchone()[0]
        retries = kinds.count("provider.retry")
        assert calls >= 3 and retries == calls  # every call, and its retry, in its iteration

    # Nothing of an iteration is recorded without it, nor against another run.
    orphans = session.db.execute(
        "SELECT kind FROM events WHERE iteration_id IS NULL"
        " AND kind IN ('provider.retry', 'agent.turn', 'sense.start', 'act.start')"
    ).fetchall()
    assert orphans == []
    unbound = session.db.execute(
        "SELECT count(*) FROM agent_calls WHERE iteration_id IS NULL"
    ).fetchone()[0]
    assert unbound == 0
    # The run's services carry the run, never an iteration someone left there.
    assert session.events.iteration_id is None and session.events.run_id == session.run_id
    assert session.recorder.iteration_id is None
    session.finish_run("done", "test")
