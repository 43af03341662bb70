"""Approval with edits: `soda approve N --edit` (the plan in $EDITOR) and a
`plan_edit` inbox file. A good edit is the plan that runs; a bad one is refused
with its reason (exit 2 for the CLI, rejected/ or a refused response for a file)
and the original plan goes on waiting. The loop runs for real in a thread with
the behavioural fake model; the person is a real `soda` subprocess."""

from __future__ import annotations

import json
import shlex
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from soda.config import load
from soda.contracts import HumanInput
from soda.human.write import write_input
from soda.loop.run import Ending, IterationResult, run_loop
from soda.repo.milestone import milestone_branch
from soda.store.db import open_db
from tests.conftest import git, soda
from tests.plan_fakes import fake_model, new_project, open_session, plan, task

RISKY = plan(task("a", risk="high"), task("b", "a"))


def editor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    """$EDITOR: a program that rewrites the plan file by the Python in `change`
    (which sees the plan as `plan`)."""
    script = tmp_path / "edit.py"
    script.write_text(
        "import json, sys\n"
        "path = sys.argv[1]\n"
        "plan = json.load(open(path))\n"
        f"{change}\n"
        "open(path, 'w').write(json.dumps(plan))\n"
    )
    monkeypatch.setenv("EDITOR", f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}")
    monkeypatch.delenv("VISUAL", raising=False)


class LoopThread:
    """One iteration of the real loop in a thread, waiting for a person."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.session = open_session(root, fake_model(RISKY))
        self.result: IterationResult | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.result = run_loop(self.session, lambda line: None, once=True)

    def wait_for_event(self, kind: str, count: int = 1, deadline: float = 90) -> None:
        db = open_db(self.root / "state" / "soda.db")
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            if (
                db.execute("SELECT count(*) FROM events WHERE kind = ?", [kind]).fetchone()[0]
                >= count
            ):
                return
            time.sleep(0.05)
        raise AssertionError(f"no {count} {kind} event within {deadline}s")

    def finish(self, deadline: float = 180) -> IterationResult:
        self.thread.join(deadline)
        assert self.result is not None, "the loop did not finish"
        return self.result


def notes(root: Path) -> dict[str, str]:
    branch = milestone_branch(load(root / "soda.toml"))
    names = git(root, "ls-tree", "--name-only", f"{branch}:notes").split()
    return {name: git(root, "show", f"{branch}:notes/{name}") for name in names}


def project_waiting(tmp_path: Path) -> tuple[Path, LoopThread]:
    root = new_project(tmp_path, {"timeout = 3600.0": "timeout = 120.0"})
    loop = LoopThread(root)
    loop.wait_for_event("approval.waiting")
    return root, loop


def event_data(root: Path, kind: str) -> list[dict[str, Any]]:
    db = open_db(root / "state" / "soda.db")
    rows = db.execute("SELECT data_json FROM events WHERE kind = ? ORDER BY id", [kind])
    return [json.loads(row[0]) for row in rows]


def test_an_edited_plan_is_the_plan_that_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, loop = project_waiting(tmp_path)
    added = (
        "dict(plan['tasks'][0], id='n', task_id=None, title='Added by a person', "
        "description='write notes/n.txt')"
    )
    editor(
        tmp_path,
        monkeypatch,
        "plan['tasks'] = plan['tasks'][:1]; plan['tasks'][0]['title'] = 'Edited a'; "
        f"plan['tasks'].append({added})",
    )
    done = soda("approve", "1", "--edit", cwd=root)
    assert done.returncode == 0, done.stderr
    assert "queued" in done.stdout
    result = loop.finish()
    assert result.ending is Ending.CONTINUE
    assert notes(root) == {"a.txt": "Edited a", "n.txt": "Added by a person"}  # b edited out
    (edited,) = event_data(root, "approval.edited")
    assert edited["iteration"] == 1 and edited["tasks"] == ["a", "n"]
    # The added task got a Trace task, closed when its work merged.
    db = open_db(root / "state" / "soda.db")
    status = db.execute("SELECT status FROM tasks WHERE title = 'Added by a person'").fetchall()
    assert status == [("closed",)]
    (verdict,) = event_data(root, "approval.verdict")
    assert verdict["approved"] is True and "with edits" in verdict["reason"]


def test_a_bad_edit_is_refused_and_the_original_plan_still_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, loop = project_waiting(tmp_path)
    editor(tmp_path, monkeypatch, "plan['tasks'][0]['depends_on'] = ['b']")
    done = soda("approve", "1", "--edit", cwd=root)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "soda: edited plan refused: plan has a dependency cycle among ['a', 'b'];"
        " the original plan still waits"
    ]
    editor(tmp_path, monkeypatch, "plan['tasks'][0]['risk'] = 'fatal'")
    done = soda("approve", "1", "--edit", cwd=root)
    assert done.returncode == 2 and "plan contract violated at $.tasks[0].risk" in done.stderr
    db = open_db(root / "state" / "soda.db")
    assert db.execute("SELECT count(*) FROM human_inputs").fetchone()[0] == 0
    assert not [p for p in (root / "state" / "inbox").iterdir() if p.suffix == ".json"]
    assert loop.thread.is_alive()  # still waiting
    write_input(root / "state", HumanInput(kind="approve", target=1))
    assert loop.finish().ending is Ending.CONTINUE
    assert notes(root) == {"a.txt": "Task a", "b.txt": "Task b"}  # the original plan


def test_inbox_edits_bad_ones_refused_with_the_reason_then_a_good_one_runs(
    tmp_path: Path,
) -> None:
    root, loop = project_waiting(tmp_path)
    inbox = root / "state" / "inbox"
    original = json.loads(
        open_db(root / "state" / "soda.db")
        .execute("SELECT orient_json FROM iterations WHERE number = 1")
        .fetchone()[0]
    )["iteration_plan"]
    cycle = json.loads(json.dumps(original))
    cycle["tasks"][0]["depends_on"] = ["b"]
    (inbox / "cycle.json").write_text(json.dumps({"kind": "plan_edit", "target": 1, "plan": cycle}))
    unknown = json.loads(json.dumps(original))
    unknown["tasks"][1]["task_id"] = 999
    (inbox / "unknown.json").write_text(
        json.dumps({"kind": "plan_edit", "target": 1, "plan": unknown})
    )
    loop.wait_for_event("approval.edit_refused")
    reason = (inbox / "rejected" / "cycle.json.reason").read_text()
    assert "edited plan refused: plan has a dependency cycle among ['a', 'b']" in reason
    (refused,) = event_data(root, "approval.edit_refused")
    assert refused["problems"] == ["task 'b' names Trace task 999, which does not exist"]
    assert loop.thread.is_alive()
    good = json.loads(json.dumps(original))
    good["tasks"][1]["title"] = "Edited b"
    (inbox / "good.json").write_text(json.dumps({"kind": "plan_edit", "target": 1, "plan": good}))
    assert loop.finish().ending is Ending.CONTINUE
    assert notes(root) == {"a.txt": "Task a", "b.txt": "Edited b"}
    db = open_db(root / "state" / "soda.db")
    responses = [r[0] for r in db.execute("SELECT response FROM human_inputs ORDER BY id")]
    assert responses[0].startswith("edited plan refused: task 'b' names Trace task 999")
    assert responses[1] == "plan approved as edited"
