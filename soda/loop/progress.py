"""Progress: every iteration makes some, or the run stops and says why.

An iteration makes progress when it lands a change (the gate's rules, target
tests included, passed on the merged tree), closes a task that was open before
the run began (ORIENT's verifier, with evidence from the code), or takes in
something a person said: an input from the queue, a verdict on a waiting plan,
or an edit of the spec. Everything else is not progress: a DONE the tests
refused, an executor that gave up or changed nothing, a merge the gate refused,
a conflict. The phases note what they did (`Iteration.progress`); as the
iteration ends, `settle` records it (`iterations.progress`, "none" when nothing
counted) and applies the limits that hold at the end of every iteration, however
DECIDE routed it:

- `[loop] max_stalled_iterations` iterations in a row without progress end the
  run STUCK, with a reason that names the pattern and what a person can do (the
  count goes across runs: only progress resets it);
- `[loop] max_iterations` (or `--max-iterations`): the last iteration a run may
  start ends it STUCK, so that at most N start;
- a loop detected by SENSE ends a run whose DONE was refused (DECIDE's own check
  never sees a DONE claim: a met spec is tried first).

A refused DONE reaches here as a CONTINUE like any other, so no claim of the
model's skips a limit.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import TYPE_CHECKING

from soda.contracts import Claims
from soda.contracts.outcomes import LOOP_OUTCOMES, IterationOutcome
from soda.gate.evidence import json_object
from soda.loop.decide import Decision, Kind
from soda.store import runs
from soda.store.db import dumps

if TYPE_CHECKING:
    from soda.loop.context import Iteration
    from soda.loop.session import Session

NONE = "none"
"""`iterations.progress` of an iteration that made no progress."""
MAX_NAMED = 3
"""Tests or reasons quoted in a stall's reason."""
MAX_QUOTE = 200


def spec_sha(session: Session) -> str | None:
    """The spec's content hash (None when it cannot be read: SENSE says why)."""
    try:
        return hashlib.sha256(session.config.spec_path.read_bytes()).hexdigest()
    except OSError:
        return None


def note_spec(session: Session, it: Iteration) -> None:
    """Record the spec this iteration reads; a person's edit since the last
    iteration is progress."""
    sha = spec_sha(session)
    if sha is None:
        return
    before = runs.last_spec_sha(session.db, it.number)
    it.record.save(spec_sha=sha)
    if before is not None and before != sha:
        it.progress.append("the spec changed")


def settle(
    session: Session,
    it: Iteration,
    claims: Claims,
    decision: Decision,
    outcome: str | None,
    act_json: dict[str, object] | None,
) -> Decision:
    """Record this iteration's progress, then end the run STUCK if a limit that
    holds at every iteration's end is reached; otherwise `decision` unchanged."""
    made = list(dict.fromkeys(it.progress))
    if outcome == IterationOutcome.MERGED:
        made.insert(0, "merged")
    it.record.save(progress="; ".join(made) if made else NONE)
    if decision.kind is not Kind.CONTINUE:
        return decision
    limit = session.config.loop.max_stalled_iterations
    if not made:
        current: Row = (it.number, outcome, NONE, decision.reason, dumps(act_json))
        stalled = _stalled(session, current, limit)
        if len(stalled) >= limit:
            return Decision(Kind.STUCK, stall_reason(stalled, limit), decision.outcome)
    if decision.outcome == IterationOutcome.DONE_REFUSED and claims.project.loop.detected:
        return Decision(
            Kind.STUCK,
            f"loop detected: {claims.project.loop.detail}; give soda a correction with "
            "`soda tell` or narrow the spec",
            decision.outcome,
        )
    if session.iterations_in_run >= session.iteration_limit:
        return Decision(
            Kind.STUCK,
            f"reached max iterations ({session.iteration_limit}) without meeting the spec; "
            "review `soda history`, then run again or raise [loop] max_iterations",
            decision.outcome,
        )
    return decision


Row = tuple[int, str | None, str | None, str | None, str | None]
"""number, outcome, progress, decision_reason, act_json (`runs.progress_records`)."""


def _stalled(session: Session, current: Row, limit: int) -> list[Row]:
    """This iteration and the iterations right before it that made no progress,
    newest first (at most `limit`). Runs do not reset the count (a daemon's next
    wake, a `soda run` again: only progress does); an iteration cut short (a
    signal, a provider's failure, a spent budget: no `progress` recorded) neither
    counts nor breaks the streak."""
    rows = [current]
    for row in runs.progress_records(session.db, current[0], 3 * limit):
        if len(rows) >= limit:
            break
        if row[2] is None:
            continue
        if row[2] != NONE:
            break
        rows.append(row)
    return rows


def stall_reason(rows: list[Row], limit: int) -> str:
    """What the stalled iterations kept doing, and what a person can do."""
    numbers = ", ".join(str(row[0]) for row in reversed(rows))
    return (
        f"no progress in {len(rows)} iterations in a row ({numbers}): {_pattern(rows)}. "
        'A person can tell soda what to do differently (`soda tell "..."`), fix or '
        "narrow the spec, or raise [loop] max_stalled_iterations (now "
        f"{limit}) in soda.toml"
    )


def _pattern(rows: list[Row]) -> str:
    outcomes = {row[1] for row in rows}
    if outcomes == {IterationOutcome.DONE_REFUSED}:
        refusal = _quote((rows[0][3] or "").removeprefix("DONE refused: "))
        return f"the model said the spec is met each time, and the tests refused it ({refusal})"
    tasks = _task_ends(rows)
    if outcomes == {IterationOutcome.NO_CHANGES}:
        return f"the executor changed nothing{_on(tasks)}"
    gave_up = [t for t in tasks if t[2] == "gave_up"]
    if outcomes == {IterationOutcome.NOTHING_COMPLETED} and gave_up:
        reason = _quote(gave_up[0][3])
        return f"the executor gave up{_on(gave_up)}" + (f" ({reason})" if reason else "")
    failing = sorted({name for row in rows for name in _failing(row[4])})
    refused = IterationOutcome.DONE_REFUSED
    if refused not in outcomes and all(
        LOOP_OUTCOMES.get(o or "") == "tests failed" for o in outcomes
    ):
        named = _names(failing)
        tests = f": {named} still fail" if named else ""
        return f"the gate refused the change{_on(tasks)} each time{tests}"
    counts = Counter(row[1] or "unrecorded" for row in rows)
    return "it ended " + ", ".join(f"{outcome} x{n}" for outcome, n in counts.most_common())


def _task_ends(rows: list[Row]) -> list[tuple[int | None, str, str, str]]:
    """(task id, title, status, reason) of every task the rows' ACT records, newest first."""
    found = []
    for row in rows:
        tasks = json_object(row[4]).get("tasks")
        for task in tasks if isinstance(tasks, list) else []:
            if isinstance(task, dict):
                task_id = task.get("task_id")
                found.append(
                    (
                        task_id if isinstance(task_id, int) else None,
                        str(task.get("title") or ""),
                        str(task.get("status") or ""),
                        str(task.get("reason") or ""),
                    )
                )
    return found


def _on(tasks: list[tuple[int | None, str, str, str]]) -> str:
    """' on task 4 "Add divide"' for the task most of them were about (by title: a
    blocked task comes back as a new one), with every id it had ("" for none)."""
    titles = Counter(t[1] for t in tasks)
    if not titles:
        return ""
    title, _ = titles.most_common(1)[0]
    ids = sorted({t[0] for t in tasks if t[1] == title and t[0] is not None})
    which = f"task {ids[0]}" if len(ids) == 1 else "tasks " + ", ".join(map(str, ids))
    if not ids:
        which = "the task"
    return f' on {which} "{_quote(title, 80)}"' if title else f" on {which}"


def _failing(act_json: str | None) -> list[str]:
    failing = json_object(act_json).get("failing")
    return list(failing) if isinstance(failing, dict) else []


def _names(names: list[str]) -> str:
    extra = len(names) - MAX_NAMED
    return ", ".join(names[:MAX_NAMED]) + (f" +{extra} more" if extra > 0 else "")


def _quote(text: str, limit: int = MAX_QUOTE) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
