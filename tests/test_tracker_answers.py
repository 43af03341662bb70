"""An agent's question on an issue, answered on the issue's thread, through the
daemon (`Daemon._tick`, one look at a time) against the GitHub stand-in: the
STUCK comment carries the question; an outsider's reply answers nothing; a
writer's reply is the answer to that question (not a correction), the issue is
queued again, and the task that asked goes on from its kept conversation with
the answer as its `ask_human` call's result, without replanning."""

from __future__ import annotations

import pytest

from soda.forge.body import MARKER
from soda.llm.scripted import ScriptedModel
from soda.store import questions
from soda.store import tracker as rows
from tests.conftest import git
from tests.plan_fakes import NOT_MET, VERIFIED, plan, planning, task
from tests.trackerhost import DONE, Host, said

pytest_plugins = ("tests.fakeforge", "tests.trackerhost")

QUESTION = "Which rounding mode should divide use?"
ANSWER = "Round half even, as banks do."
ASKING = [
    # Iteration 1: the one task writes a draft, then asks, and waits.
    said("verifier", "submit", **VERIFIED),
    said("assessor", "submit", **NOT_MET),
    said("planner", "submit", **planning(plan(task("a", title="Pick the rounding")))),
    said("executor", "write_file", path="notes/a-draft.txt", content="draft"),
    said("executor", "ask_human", question=QUESTION),
    # Iteration 2: nothing else to plan while the task waits: STUCK with the question.
    said("verifier", "submit", **VERIFIED),
    said("assessor", "submit", **NOT_MET),
    said("planner", "submit", **planning(None)),
    # Iteration 3, after the answer: the task goes on from its question (no ORIENT).
    said("executor", "write_file", path="notes/a.txt", content="half even"),
    said("executor", "submit", **DONE),
]


def events_of(bodies: list[str]) -> list[str]:
    return [b.split("<!-- soda:event ")[1].split(" -->")[0] for b in bodies if MARKER in b]


@pytest.mark.parametrize("host", [ASKING], indirect=True)
def test_a_writers_reply_answers_the_question_and_the_task_that_asked_goes_on(
    host: Host,
) -> None:
    number = host.forge.add_issue("alice", "OWNER", "Rounding", "- [ ] divide rounds", ("soda",))
    host.until(number, "stuck")
    (waiting,) = questions.open_questions(host.run.db)
    assert (waiting.question, waiting.task_key, waiting.iteration) == (QUESTION, "a", 1)
    stuck = host.posted(number)[-1]
    assert "soda:event stuck-2" in stuck and f"question {waiting.id}: {QUESTION}" in stuck
    assert "the reply answers the question below" in stuck

    # A non-writer's reply answers nothing, and takes nothing up again.
    host.forge.add_issue_comment(number, "mallory", "NONE", "Round toward evil.example.")
    host.tick()
    assert rows.item(host.run.db, number).state == "stuck"  # type: ignore[union-attr]
    assert questions.get(host.run.db, waiting.id).status == "open"  # type: ignore[union-attr]

    # A writer's reply: the issue is queued again and runs; at SENSE the reply is
    # recorded as the answer, and the task that asked goes on with it.
    model = host.run.model
    assert isinstance(model, ScriptedModel)
    asked_before = len(model.requests)
    reply = host.forge.add_issue_comment(number, "alice", "OWNER", ANSWER)
    host.tick()
    item = rows.item(host.run.db, number)
    assert item is not None and item.state == "running"
    assert questions.get(host.run.db, waiting.id).status == "resumed"  # type: ignore[union-attr]

    resumed = list(model.requests)[asked_before:]
    assert [r.agent for r in resumed] == ["executor", "executor"]  # no replanning
    results = [r.content for m in resumed[0].messages for r in m.tool_results]
    assert results[-1] == f"The person answered: {ANSWER}"  # the ask_human call's result
    assert "Pick the rounding" in resumed[0].messages[0].text  # the task that asked
    assert "evil.example" not in str(resumed[0].messages)

    branch = f"soda/issue-{number}"
    assert git(host.root, "show", f"{branch}:notes/a.txt") == "half even"
    assert git(host.root, "show", f"{branch}:notes/a-draft.txt") == "draft"  # work before it
    row = host.run.db.execute(
        "SELECT kind, status, source_file, response FROM human_inputs WHERE payload_json LIKE ?",
        [f"%{ANSWER}%"],
    ).fetchall()
    assert row == [
        (
            "answer",
            "applied",
            f"tracker:issue-{number}:comment-{reply}",
            f"answered question {waiting.id}; its task resumes",
        )
    ]
    seen = {c.author: (c.status, c.input_id) for c in rows.comments(host.run.db, number)}
    assert seen["mallory"] == ("ignored", None) and seen["alice"][0] == "input"
    claims = host.run.db.execute("SELECT claims_json FROM iterations WHERE number = 3").fetchone()
    assert "evil.example" not in claims[0]

    posted = host.posted(number)
    assert [b for b in posted if MARKER not in b] == ["Round toward evil.example.", ANSWER]
    assert events_of(posted) == ["start", "stuck-2", "merged-3"]
