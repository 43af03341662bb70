"""What a repository's own record says about the run a person's input goes to:
`DatabaseRecord`, the `soda.human.commands.RunRecord` of the CLI and the web
dashboard (the rules and their words are in `commands`). The daemon checks an
input again when it takes it."""

from __future__ import annotations

import json

from sqlite_utils import Database

from soda.config import Config
from soda.contracts import IterationPlan
from soda.errors import InputError
from soda.human.approval import edit_problems, waiting_what
from soda.human.commands import Started, Waiting
from soda.human.commands import waiting_plan as _waiting_plan
from soda.store import approvals, events, history, questions, runs


class DatabaseRecord:
    """A repository's run as its database keeps it (`soda.human.commands.RunRecord`)."""

    run = ""

    def __init__(self, db: Database, config: Config | None = None) -> None:
        self.db = db
        self.config = config
        """Needed only to check an edited plan (`[plan] max_tasks`, the milestone)."""

    def look(self, number: int | None = None) -> str:
        return f"`soda show {number}`" if number is not None else "`soda history`"

    def waiting(self) -> Waiting | None:
        suspended = approvals.waiting(self.db)
        if suspended is None:
            return None
        plan = IterationPlan.model_validate_json(suspended.plan_json)
        return Waiting(suspended.iteration, suspended.kind, waiting_what(suspended), plan)

    def latest(self) -> int:
        return runs.next_iteration_number(self.db) - 1

    def takes_next(self) -> bool:
        return True  # the daemon may not have started it yet; it waits in the inbox

    def started(self, number: int) -> Started | None:
        row = history.iteration(self.db, number)
        if row is None:
            return None
        if row["ended_at"] is not None:
            return Started(row["outcome"] or row["decision"] or "no outcome")
        return Started(None, asked=events.count(self.db, row["id"], "approval.waiting") > 0)

    def running_plan(self, number: int) -> IterationPlan | None:
        row = history.iteration(self.db, number)
        orient = json.loads(row["orient_json"]) if row and row["orient_json"] else {}
        plan = orient.get("iteration_plan")
        return IterationPlan.model_validate(plan) if plan is not None else None

    def edit_problems(self, plan: IterationPlan) -> list[str]:
        assert self.config is not None, "a DatabaseRecord that checks edits needs the config"
        return edit_problems(plan, self.db, self.config)

    def question(self, question_id: int) -> str:
        return open_question(self.db, question_id).question


def open_question(db: Database, question_id: int) -> questions.Question:
    """Question `question_id`, if it is open (waits for an answer); else InputError."""
    asked = questions.get(db, question_id)
    if asked is None:
        raise InputError(f"no question {question_id} (see `soda status`)")
    if asked.status != "open":
        raise InputError(f"question {question_id} is {asked.status}, not open: nothing to answer")
    return asked


def waiting_plan(db: Database, number: int) -> IterationPlan:
    """Iteration `number`'s plan as ORIENT left it (bound to Trace tasks), for a page."""
    return _waiting_plan(DatabaseRecord(db), number)
