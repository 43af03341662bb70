"""The executor's standing context: the spec, the person's corrections and
overrides in force, the task's comments and blocker, the active learnings,
seen in the executor's first message through a real ACT run."""

from __future__ import annotations

from pathlib import Path

from soda.contracts import HumanInput
from soda.human.write import write_input
from soda.llm.base import ModelRequest
from soda.llm.function import FunctionModel, Reply
from soda.loop.act.brief import GUIDANCE_ITERATIONS, guidance, task_history
from tests.test_parallel import open_project, run_act, task, writes


def test_the_executor_sees_corrections_comments_blockers_and_learnings(tmp_path: Path) -> None:
    firsts: list[str] = []

    def executor(request: ModelRequest) -> Reply:
        if len(request.messages) == 1:
            firsts.append(request.messages[0].text)
        return writes("notes/x.txt", "x")(request)

    session = open_project(tmp_path, FunctionModel.by_agent({"executor": executor}))
    state = session.config.state_dir
    write_input(state, HumanInput(kind="correction", text="Use Decimal, never float."))
    write_input(state, HumanInput(kind="override", action="constraint", text="No new deps."))
    write_input(state, HumanInput(kind="pause"))  # control: not the executor's business
    session.human.ingest(settle_seconds=0)
    tracked = session.tracker.create("divide", parent_id=session.milestone.root_task_id)
    session.tracker.comment(tracked.id, "verifier", "the last divide lost precision", None)
    session.tracker.block(tracked.id, "needs the rounding rule")
    session.store_learnings(["tests run with pytest -q"], "verifier", None)

    run_act(session, task("x", task_id=tracked.id))

    text = firsts[0]
    assert "correction: Use Decimal, never float." in text
    assert "override: add constraint: No new deps." in text
    assert "pause" not in text.split("## Guidance", 1)[1].split("## ", 1)[0]
    assert "the last divide lost precision" in text
    assert "blocked: needs the rounding rule" in text
    assert "tests run with pytest -q" in text
    assert "# Calculator" in text  # the spec
    # Stable parts first (the prompt cache): spec, guidance, learnings, plan, then the task.
    order = [text.index(f"## {name}") for name in ("Spec", "Guidance", "Learnings", "Plan")]
    assert order == sorted(order) and order[-1] < text.index("## Task\n")
    session.finish_run("done", "test")


def test_guidance_keeps_what_was_read_in_recent_iterations(tmp_path: Path) -> None:
    session = open_project(tmp_path, FunctionModel.by_agent({}))
    state = session.config.state_dir
    write_input(state, HumanInput(kind="correction", text="old advice"))
    write_input(state, HumanInput(kind="correction", text="recent advice"))
    session.human.ingest(settle_seconds=0)
    old, recent = (item.id for item in session.human.pending())
    session.human.mark_applied([old], 1, "read")
    session.human.mark_applied([recent], 1 + GUIDANCE_ITERATIONS, "read")

    now = 1 + GUIDANCE_ITERATIONS
    shown = guidance(session, now)
    assert f"(iteration {now}) correction: recent advice" in shown
    assert "old advice" not in shown  # read too long ago: no longer in force
    assert guidance(session, now + GUIDANCE_ITERATIONS) == "(none)"
    session.finish_run("done", "test")


def test_a_new_task_has_no_history(tmp_path: Path) -> None:
    session = open_project(tmp_path, FunctionModel.by_agent({}))
    assert task_history(session, task("n")) == "(a new task: no history)"
    assert "not found" in task_history(session, task("n", task_id=9999))
    session.finish_run("done", "test")
