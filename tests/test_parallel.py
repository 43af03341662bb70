"""Parallel tasks in ACT, on the demo's sample project with real git, the real
gate (pytest in the jail) and a behavioural fake model: tasks of one batch
overlap in time, merge one at a time (each against the tip with the earlier
merges), a task beaten by a sibling's merge runs again on the new tip, cancel
and stop reach running tasks, and recovery still closes every merged task.

The helpers here are shared by test_retry_cascade.py and test_brief.py."""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from soda.cli.demo import prepare
from soda.config import load
from soda.contracts import HumanInput, IterationPlan, PlanTask
from soda.errors import ContractViolation, Interrupted
from soda.human.write import write_input
from soda.llm.base import ModelRequest
from soda.llm.function import FunctionModel, Reply, call, first_turn, submit
from soda.loop.act import ActResult, act
from soda.loop.recovery import recover
from soda.loop.session import Session
from soda.store import runs
from tests.conftest import git, wait_for
from tests.plan_fakes import done

Answer = Callable[[ModelRequest], Reply]
DEADLINE_S = 30.0


def the_task(request: ModelRequest) -> dict[str, Any]:
    """The task the executor was given (its `## Task` section)."""
    text = request.messages[0].text
    match = re.search(r"## Task\n\n(.*?)\n\n## ", text, re.S)
    assert match, text
    return json.loads(match.group(1))


def key_of(request: ModelRequest) -> str:
    """The plan key of the executor's task, from its title (`task` names it "Task
    KEY"): the executor is shown the Trace task id, not the plan's key."""
    return str(the_task(request)["title"]).removeprefix("Task ")


def writes(path: str, content: str) -> Answer:
    """An executor that writes one file, then submits."""

    def answer(request: ModelRequest) -> Reply:
        if first_turn(request):
            return call("write_file", path=path, content=content)
        return done(f"wrote {path}")

    return answer


def by_key(answers: dict[str, Answer]) -> Answer:
    """The executor's answer chosen by its task's key."""
    return lambda request: answers[key_of(request)](request)


def task(key: str, *deps: str, task_id: int | None = None, description: str = "-") -> PlanTask:
    return PlanTask(
        id=key,
        task_id=task_id,
        title=f"Task {key}",
        description=description,
        depends_on=list(deps),
        risk="low",
        tool_hints=[],
    )


def open_project(tmp_path: Path, model: FunctionModel, **act_settings: Any) -> Session:
    """The demo's sample project on `model`, with [act] settings changed."""
    root = tmp_path / "project"
    prepare(root)
    config = load(root / "soda.toml")
    config.act.task_retries = 0
    for name, value in act_settings.items():
        setattr(config.act, name, value)
    return Session.open(config, model=model)


def run_act(session: Session, *tasks: PlanTask) -> ActResult:
    it = session.begin_iteration()
    plan = IterationPlan(intent="test", approach="-", tasks=list(tasks))
    return act(session, it, plan, lambda line: None)


def events(session: Session, kind: str) -> list[dict[str, Any]]:
    rows = session.db.execute("SELECT data_json FROM events WHERE kind = ? ORDER BY id", [kind])
    return [json.loads(row[0]) for row in rows]


def milestone_merges(session: Session) -> list[str]:
    """Merge commits on the milestone's first-parent history, oldest first."""
    log = git(
        session.config.root, "rev-list", "--first-parent", "--merges", "--reverse",
        session.milestone.branch,
    )  # fmt: skip
    return log.split()


def work_branches(session: Session) -> str:
    return git(session.config.root, "branch", "--list", "soda-work/*")


# --- overlap and merge order ---------------------------------------------------


def test_tasks_of_a_batch_run_at_the_same_time_and_merge_one_by_one(tmp_path: Path) -> None:
    keys = ("a", "b", "c")
    together = threading.Barrier(len(keys), timeout=DEADLINE_S)
    spans: dict[str, list[float]] = {}

    def executor(request: ModelRequest) -> Reply:
        key = key_of(request)
        if first_turn(request):
            spans[key] = [time.monotonic()]
            together.wait()  # breaks (and fails the task) unless all three run at once
            return call("write_file", path=f"notes/{key}.txt", content=key)
        spans[key].append(time.monotonic())
        return done(f"note {key}")

    session = open_project(tmp_path, FunctionModel.by_agent({"executor": executor}))
    result = run_act(session, *(task(key) for key in keys))

    assert result.outcome == "merged", result.detail
    assert [t["status"] for t in result.tasks] == ["completed"] * 3
    # The three executors' intervals overlap: each began before any ended.
    assert max(start for start, _ in spans.values()) < min(end for _, end in spans.values())
    merges = milestone_merges(session)
    assert len(merges) == 3 and result.merged_commits == merges
    assert result.merged_commit == merges[-1] == git(session.config.root, "rev-parse", "soda/spec")
    root = session.config.root
    for earlier, later in itertools.pairwise(merges):
        # One at a time: each merge stands on the previous one, and its tested tree
        # holds the earlier tasks' work.
        assert git(root, "rev-parse", f"{later}^1") == earlier
        assert git(root, "diff", "--name-only", earlier, later).count("notes/") == 1
    assert sorted(git(root, "ls-tree", "--name-only", merges[-1], "notes/").split()) == [
        f"notes/{key}.txt" for key in keys
    ]
    gates = events(session, "act.gate")
    assert [g["ok"] for g in gates] == [True] * 3
    trailers = [git(root, "log", "-1", "--format=%B", m) for m in merges]
    assert all("Soda-Iteration: 1" in body for body in trailers)
    assert work_branches(session) == ""  # every task's branch deleted
    session.finish_run("done", "test")


def test_a_task_beaten_by_a_siblings_merge_runs_again_on_the_new_tip(tmp_path: Path) -> None:
    """`a` adds a test that allows one note; `b` forks before `a` lands and adds a
    second note: against the tip with `a` its merge fails the gate, so `b` runs
    again from the new tip and (told why) writes elsewhere."""
    root_of: dict[str, Path] = {}
    seen_notes: list[list[str]] = []
    guard = (
        "from pathlib import Path\n\n\ndef test_one_note():\n"
        "    assert len(list(Path('notes').glob('*.txt'))) <= 1\n"
    )

    def a(request: ModelRequest) -> Reply:
        turns = sum(1 for m in request.messages if m.tool_calls)
        if turns == 0:
            return call("write_file", path="notes/a.txt", content="a")
        if turns == 1:
            return call("write_file", path="tests/test_notes.py", content=guard)
        return done("a and its guard")

    def b(request: ModelRequest) -> Reply:
        notes = the_task(request).get("notes", [])
        seen_notes.append(notes)
        if first_turn(request) and not notes:
            # Fork before `a` lands, finish after it did.
            return call("write_file", path="notes/b.txt", content="b")
        if first_turn(request):
            return call("write_file", path="notes/b.md", content="b")
        if not notes:
            wait_for(lambda: "notes/a.txt" in landed(), DEADLINE_S, "a's merge")
        return done("b")

    def landed() -> str:
        return git(root_of["root"], "ls-tree", "-r", "--name-only", "soda/spec")

    model = FunctionModel.by_agent({"executor": by_key({"a": a, "b": b})})
    session = open_project(tmp_path, model)
    root_of["root"] = session.config.root
    result = run_act(session, task("a"), task("b"))

    assert result.outcome == "merged", result.detail
    statuses = {t["key"]: (t["status"], t["attempts"]) for t in result.tasks}
    assert statuses == {"a": ("completed", 1), "b": ("completed", 2)}
    gates = [(g["key"], g["ok"]) for g in events(session, "act.gate")]
    assert gates == [("a", True), ("b", False), ("b", True)]
    retried = events(session, "act.task.retried")
    assert [(r["key"], r["kind"]) for r in retried] == [("b", "sibling")]
    assert "gate_failed" in retried[0]["reason"]
    assert any("another task of the plan merged" in " ".join(n) for n in seen_notes)
    first, second = milestone_merges(session)
    # b's second attempt forked from the tip that holds a's merge.
    git(session.config.root, "merge-base", "--is-ancestor", first, f"{second}^2")
    session.finish_run("done", "test")


def test_a_conflict_with_a_sibling_is_retried_on_the_new_tip_then_blocks(
    tmp_path: Path,
) -> None:
    """All three edit README.md. `a` lands first; `b` and `c` conflict with it and
    run again from the new tip, both at once; one lands, and the other, in
    conflict a second time, ends as a blocker."""
    second_round: list[str] = []

    def editor(key: str) -> Answer:
        def answer(request: ModelRequest) -> Reply:
            again = bool(the_task(request).get("notes"))
            if first_turn(request):
                if again:
                    second_round.append(key)
                return call("write_file", path="README.md", content=f"{key} {again}\n")
            if key != "a" and not again:
                wait_for(lambda: events(session, "act.merged") != [], DEADLINE_S, "a's merge")
            if again:
                wait_for(lambda: len(second_round) == 2, DEADLINE_S, "both second attempts forked")
            return done(key)

        return answer

    model = FunctionModel.by_agent({"executor": by_key({k: editor(k) for k in "abc"})})
    session = open_project(tmp_path, model)
    parent = session.milestone.root_task_id
    ids = {k: session.tracker.create(k, parent_id=parent).id for k in "bc"}
    result = run_act(session, task("a"), task("b", task_id=ids["b"]), task("c", task_id=ids["c"]))

    by = {t["key"]: t for t in result.tasks}
    assert by["a"]["status"] == "completed" and by["a"]["attempts"] == 1
    ends = sorted((by[k]["status"], by[k]["failure"], by[k]["attempts"]) for k in "bc")
    assert ends == [("completed", "", 2), ("failed", "conflict", 2)]
    retried = events(session, "act.task.retried")
    assert sorted((r["key"], r["kind"]) for r in retried) == [("b", "sibling"), ("c", "sibling")]
    loser = next(k for k in "bc" if by[k]["status"] == "failed")
    winner = "c" if loser == "b" else "b"
    assert session.tracker.show(ids[loser]).status == "blocked"
    assert session.tracker.show(ids[winner]).status == "closed"
    readme = git(session.config.root, "show", "soda/spec:README.md")
    assert readme == f"{winner} True"  # the retry built on a's tip
    assert len(result.merged_commits) == 2
    session.finish_run("done", "test")


# --- cancel and stop -------------------------------------------------------------


def test_cancel_reaches_every_running_task(tmp_path: Path) -> None:
    started = threading.Barrier(2, timeout=DEADLINE_S)
    calls: list[str] = []

    def executor(request: ModelRequest) -> Reply:
        key = key_of(request)
        calls.append(key)
        if first_turn(request):
            started.wait()
            if key == "a":
                write_input(session.config.state_dir, HumanInput(kind="cancel"))
        time.sleep(0.1)  # the model's latency: a turn takes a moment
        return call("list_files", path=".")

    model = FunctionModel.by_agent({"executor": executor})
    session = open_project(tmp_path, model)
    result = run_act(session, task("a"), task("b"), task("c", "a", "b"))

    by = {t["key"]: t for t in result.tasks}
    assert by["a"]["status"] == by["b"]["status"] == "cancelled"
    assert by["c"]["status"] == "skipped" and "cancelled" in by["c"]["reason"]
    assert result.merged_commits == []
    assert len(calls) < 2 * 25  # stopped well before the turn limit (40)
    row = session.db.execute("SELECT status FROM human_inputs WHERE kind = 'cancel'").fetchone()
    assert row[0] == "applied"
    assert work_branches(session) == ""
    session.finish_run("done", "test")


def test_stop_reaches_every_running_task(tmp_path: Path) -> None:
    started = threading.Barrier(2, timeout=DEADLINE_S)
    turns: list[str] = []

    def executor(request: ModelRequest) -> Reply:
        turns.append(key_of(request))
        if first_turn(request):
            started.wait()
            session.stop_requested = True  # a signal arrives while both run
        return call("list_files", path=".")

    session = open_project(tmp_path, FunctionModel.by_agent({"executor": executor}))
    with pytest.raises(Interrupted):
        run_act(session, task("a"), task("b"))
    assert sorted(turns) == ["a", "b"]  # neither got a second turn
    assert work_branches(session) == ""
    assert milestone_merges(session) == []
    session.finish_run("interrupted", "test")


def test_a_broken_answer_in_one_task_stops_the_others_and_is_what_act_raises(
    tmp_path: Path,
) -> None:
    started = threading.Barrier(2, timeout=DEADLINE_S)
    turns: list[str] = []

    def executor(request: ModelRequest) -> Reply:
        key = key_of(request)
        turns.append(key)
        if first_turn(request):
            started.wait()
        if key == "b":  # the second task of the plan: its error, not a's stop, is raised
            return submit({"summary": 42})  # breaks the contract, again: a HALT
        wait_for(lambda: "b" in turns, DEADLINE_S, "b's answer")
        time.sleep(0.05)  # the model's latency
        return call("list_files", path=".")

    session = open_project(tmp_path, FunctionModel.by_agent({"executor": executor}))
    with pytest.raises(ContractViolation):
        run_act(session, task("a"), task("b"))
    assert turns.count("a") < 40  # a was stopped, not left to run out of turns
    assert work_branches(session) == "" and milestone_merges(session) == []
    session.finish_run("halted", "test")


# --- shared state ------------------------------------------------------------------


def test_one_connection_serves_many_threads(tmp_path: Path) -> None:
    from soda.events import Events
    from soda.store import open_db

    db = open_db(tmp_path / "soda.db")
    emitter = Events(db)
    ids: list[int] = []
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(40):
                emitter.emit("test.thread", {"n": n, "i": i})
                with db.conn:
                    cursor = db.conn.execute(
                        "INSERT INTO events (ts, kind, data_json) VALUES ('t', 'test.pair', ?)",
                        [json.dumps({"n": n})],
                    )
                    ids.append(cursor.lastrowid)
                with db.atomic():  # sqlite-utils' BEGIN ... COMMIT, whole
                    db.execute("INSERT INTO events (ts, kind, data_json) VALUES ('t', 'x', '{}')")
                list(db.query("SELECT count(*) AS c FROM events"))  # a savepoint
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE_S)
    assert errors == []
    assert len(set(ids)) == 8 * 40  # every insert saw its own row id
    count = db.execute("SELECT count(*) FROM events WHERE kind = 'test.thread'").fetchone()[0]
    assert count == 8 * 40


# --- recovery -------------------------------------------------------------------------


def test_recovery_closes_the_tasks_of_every_merge_of_an_iteration(tmp_path: Path) -> None:
    model = FunctionModel.by_agent(
        {"executor": by_key({"a": writes("notes/a.txt", "a"), "b": writes("notes/b.txt", "b")})}
    )
    session = open_project(tmp_path, model)
    parent = session.milestone.root_task_id
    first = session.tracker.create("a", parent_id=parent)
    second = session.tracker.create("b", parent_id=parent)
    result = run_act(session, task("a", task_id=first.id), task("b", task_id=second.id))
    assert len(result.merged_commits) == 2
    # A crash before anything was recorded: the iteration unfinished, tasks open.
    row = session.db.execute("SELECT id FROM iterations").fetchone()
    runs.save_iteration(session.db, row[0], {"outcome": None, "merged_commit": None})
    for t in (first, second):
        session.tracker.reopen(t.id, "as if the close was lost")

    report = recover(session.config, session.db, session.repo, session.events)

    assert report.merges_recorded == [1]
    assert report.tasks_closed == 2
    assert {session.tracker.show(t.id).status for t in (first, second)} == {"closed"}
    merged = session.db.execute("SELECT outcome, merged_commit FROM iterations").fetchone()
    assert tuple(merged) == ("merged", result.merged_commit)
    session.finish_run("done", "test")
