"""Acting from the dashboard, in a real headless Chromium: the loop runs for
real (in a thread, with the behavioural fake model) and waits for a person; the
person edits, approves and answers on the page served by a real `soda web`
process. Each input is written by the same code as the CLI's, recorded with
provenance `web`; a bad edit is refused with its reason and nothing is written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from soda.loop.run import Ending, run_loop
from soda.store import questions
from soda.store.db import open_db
from tests.plan_fakes import fake_model, new_project, open_session
from tests.test_approve_edit import LoopThread, notes
from tests.test_questions import PLAN, QUESTION, asking_executor, on_milestone
from tests.web_helpers import screenshot, serving


def inputs(root: Path) -> list[tuple[str, str, str]]:
    """kind, source and status of every recorded human input."""
    db = open_db(root / "state" / "soda.db")
    return db.execute("SELECT kind, source, status FROM human_inputs ORDER BY id").fetchall()


def inbox_files(root: Path) -> list[Path]:
    """Inputs waiting in the inbox (not soda's own dot files, such as its lock)."""
    inbox = root / "state" / "inbox"
    return [p for p in inbox.iterdir() if p.is_file() and not p.name.startswith(".")]


def test_a_bad_edit_is_refused_then_approving_on_the_page_lets_the_run_go_on(
    tmp_path: Path, page: Any
) -> None:
    from playwright.sync_api import expect

    root = new_project(tmp_path, {"timeout = 3600.0": "timeout = 120.0"})
    with serving(root) as server:
        # The page is open before soda asks: the question arrives live.
        page.goto(server.base + "/")
        expect(page.locator(".card.empty")).to_be_visible()
        loop = LoopThread(root)
        loop.wait_for_event("approval.waiting")
        approval = page.locator("#approval")
        expect(approval.locator("h2")).to_have_text("Iteration 1 waits for your approval")
        expect(page.locator("#running")).to_have_text("running")
        expect(approval).to_contain_text("the plan is high risk")
        screenshot(page, "now-waiting")
        page.goto(server.base + "/iteration/1")
        expect(page.locator("#dag .node")).to_have_count(2)
        expect(page.locator("#dag .node[data-key=a]")).to_have_attribute("data-state", "waiting")
        screenshot(page, "iteration-waiting")

        # A cycle: refused with its reason, shown beside the edit; nothing written.
        page.locator("#approval a", has_text="Edit, then approve").click()
        plan = json.loads(page.locator("#plan-text").input_value())
        plan["tasks"][0]["depends_on"] = ["b"]
        page.locator("#plan-text").fill(json.dumps(plan))
        page.locator("[data-action=edit]").click()
        expect(page.locator("#problem")).to_have_text(
            "edited plan refused: plan has a dependency cycle among ['a', 'b'];"
            " the original plan still waits"
        )
        assert json.loads(page.locator("#plan-text").input_value()) == plan  # kept to fix
        screenshot(page, "edit-refused")
        assert inbox_files(root) == [] and inputs(root) == []
        assert loop.thread.is_alive()

        # With the keyboard alone: Tab to Approve, then Enter.
        page.goto(server.base + "/")
        for _ in range(30):
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.dataset.action") == "approve":
                break
        else:
            raise AssertionError("Tab never reached the Approve button")
        page.keyboard.press("Enter")
        expect(page.locator(".said")).to_have_text("queued approve: plan of iteration 1")
        result = loop.finish()
        page.goto(server.base + "/iteration/1")
        expect(page.locator("#human li")).to_have_text("#1 approve → plan approved")
        expect(page.locator("#dag .node[data-key=b]")).to_have_attribute("data-state", "completed")
        screenshot(page, "iteration-approved")
    assert result.ending is Ending.CONTINUE
    assert notes(root) == {"a.txt": "Task a", "b.txt": "Task b"}  # the original plan ran
    assert inputs(root) == [("approve", "web", "applied")]


def test_answering_a_question_on_the_page_resumes_its_task(tmp_path: Path, page: Any) -> None:
    from playwright.sync_api import expect

    root = new_project(tmp_path)
    model = fake_model(PLAN, executor=asking_executor([]))
    assert run_loop(open_session(root, model), lambda line: None, once=True).ending is (
        Ending.CONTINUE
    )
    with serving(root) as server:
        page.goto(server.base + "/")
        asked = page.locator("#question-1")
        expect(asked).to_contain_text(QUESTION)
        screenshot(page, "now-question")
        # An empty answer is refused in one line; nothing is written.
        code, _, text = server.request(
            "POST", "/act/answer", f"question=1&text=&csrf={server.csrf()}"
        )
        assert (code, text.count("Traceback")) == (400, 0) and inbox_files(root) == []
        asked.locator("textarea").fill("half even")
        asked.locator("[data-action=answer]").click()
        expect(page.locator(".said")).to_contain_text("queued answer")
        (written,) = inbox_files(root)
        assert written.name.endswith(".web.json")
    session = open_session(root, model)
    assert run_loop(session, lambda line: None, once=True).ending is Ending.CONTINUE
    assert questions.get(session.db, 1).status == "resumed"
    assert on_milestone(root, "notes/a.txt") == "half even"
    assert inputs(root) == [("answer", "web", "applied")]


def waiting(tmp_path: Path) -> LoopThread:
    """The real loop, one iteration, its risky plan waiting for a person."""
    loop = LoopThread(new_project(tmp_path, {"timeout = 3600.0": "timeout = 120.0"}))
    loop.wait_for_event("approval.waiting")
    return loop


def test_a_good_edit_on_the_page_is_the_plan_that_runs(tmp_path: Path, page: Any) -> None:
    from playwright.sync_api import expect

    loop = waiting(tmp_path)
    with serving(loop.root) as server:
        page.goto(server.base + "/iteration/1/edit")
        plan = json.loads(page.locator("#plan-text").input_value())
        plan["tasks"][1]["title"] = "Edited b"
        page.locator("#plan-text").fill(json.dumps(plan, indent=2))
        page.locator("[data-action=edit]").click()
        expect(page.locator(".said")).to_have_text("queued plan_edit")
        expect(page).to_have_url(f"{server.base}/iteration/1?said=queued+plan_edit")
        # The running iteration's page follows it: its tasks turn completed.
        for key in ("a", "b"):
            expect(page.locator(f"#dag .node[data-key={key}]")).to_have_attribute(
                "data-state", "completed", timeout=30_000
            )
        expect(page.locator("#dag .node[data-key=b] .node-title")).to_have_text("Edited b")
        expect(page.locator("#edited")).to_have_text("as a person edited it")
        assert loop.finish().ending is Ending.CONTINUE
    assert notes(loop.root) == {"a.txt": "Task a", "b.txt": "Edited b"}
    assert inputs(loop.root) == [("plan_edit", "web", "applied")]


def test_rejecting_on_the_page_stops_the_plan_with_the_reason(tmp_path: Path, page: Any) -> None:
    from playwright.sync_api import expect

    loop = waiting(tmp_path)
    with serving(loop.root) as server:
        page.goto(server.base + "/iteration/1")
        page.locator("#approval input[name=reason]").fill("not the schema")
        page.locator("#approval [data-action=reject]").click()
        expect(page.locator(".said")).to_have_text(
            "queued reject: plan of iteration 1 (not the schema)"
        )
        assert loop.finish().ending is Ending.CONTINUE
    db = open_db(loop.root / "state" / "soda.db")
    assert db.execute("SELECT outcome FROM iterations").fetchone()[0] == "rejected"
    assert (
        db.execute("SELECT count(*) FROM agent_calls WHERE agent = 'executor'").fetchone()[0] == 0
    )
    assert inputs(loop.root) == [("reject", "web", "applied")]
    verdict = db.execute("SELECT data_json FROM events WHERE kind = 'approval.verdict'")
    assert "not the schema" in verdict.fetchone()[0]
