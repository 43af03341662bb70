"""What each page shows, gathered from the CLI's reports (`Site.reports`) and
the store's named queries: plain dicts and shapes for the templates."""

from __future__ import annotations

import json
from typing import Any

from soda.errors import InputError
from soda.human.approval import EDIT_TAKEN
from soda.human.checks import waiting_plan
from soda.human.routing import EDIT_KINDS
from soda.store import agent_calls, history, test_results
from soda.store import events as event_rows
from soda.store.events import EventRow, as_record, data_text
from soda.trace import SqliteTracker, Task
from soda.web.shapes import Chart, bar_chart, cache_share, percent, plan_dag
from soda.web.site import Site

HISTORY_LIMIT = 200
EVENTS_SHOWN = 200
TEST_OUTPUT_CHARS = 4000
"""Characters of a failing test's output an Iteration page shows."""


def spend_of(site: Site, number: int) -> dict[str, Any]:
    """calls, tokens and cost of iteration `number`'s model calls so far."""
    for key, calls, tokens_in, tokens_out, cost in agent_calls.cost_by_iteration(site.db):
        if key == number:
            return {"calls": calls, "tokens": tokens_in + tokens_out, "cost_usd": float(cost)}
    return {"calls": 0, "tokens": 0, "cost_usd": 0.0}


def now(site: Site) -> dict[str, Any]:
    """The Now page: running or not, the iteration (running, else the last),
    what waits for a person, the last error, the budgets."""
    status = site.reports.status()
    latest = site.reports.history(1)["iterations"]
    number = status["iteration"] or (latest[-1]["number"] if latest else None)
    record = history.iteration(site.db, number) if number else None
    approval = status["pending_approval"]
    plan = None
    if approval and waits_for_plan(site):
        try:
            plan = waiting_plan(site.db, approval["iteration"])
        except InputError:
            plan = None
    budgets = [{**b, "percent": percent(b["used"], b["limit"])} for b in status["budgets"]]
    return {
        "status": status,
        "number": number,
        "running_now": bool(status["running"] and status["iteration"]),
        "record": record,
        "spend": spend_of(site, number) if number else None,
        "approval": approval,
        "plan": plan.model_dump(mode="json") if plan else None,
        "budgets": budgets,
        "empty": number is None,
    }


def waits_for_plan(site: Site) -> bool:
    """Whether the newest approval asked for is a plan's (its risk given), not a
    merge's (its subject given): see `soda.human.approval.await_approval`."""
    row = event_rows.last_of_kinds(site.db, ["approval.waiting"])
    data = json.loads(row[5]) if row else {}
    return isinstance(data, dict) and "risk" in data


def history_page(site: Site, limit: int) -> dict[str, Any]:
    """The History page: one row per iteration and its three charts."""
    rows = site.reports.history(limit)["iterations"]
    spend = {
        key: (tin + tout, cost)
        for key, _, tin, tout, cost in agent_calls.cost_by_iteration(site.db)
    }
    gate = {
        n: (passed, failed)
        for n, _, passed, failed in test_results.gate_by_iteration(site.db, limit)
    }
    cost = bar_chart(
        "cost per iteration",
        [(r["number"], [("cost", spend.get(r["number"], (0, 0.0))[1])]) for r in rows],
        "$",
    )
    tokens = bar_chart(
        "tokens per iteration",
        [(r["number"], [("tokens", float(spend.get(r["number"], (0, 0.0))[0]))]) for r in rows],
        "tok",
    )
    tests = bar_chart(
        "the gate: tests passed and failed",
        [
            (n, [("passed", float(p)), ("failed", float(f))])
            for n, (p, f) in sorted(gate.items())
            if any(r["number"] == n for r in rows)
        ],
        "tests",
    )
    charts: list[Chart] = [cost, tokens, tests]
    return {"rows": rows, "charts": charts, "gate": gate, "limit": limit}


def iteration_page(site: Site, number: int) -> dict[str, Any]:
    """The Iteration page: `soda show N --json`, the plan's DAG, each task's
    steps, the gate's per-test results and every agent call."""
    record = site.reports.iteration(number)
    orient = record.get("orient") or {}
    act = record.get("act") or {}
    claims = record.get("claims") or {}
    plan = orient.get("iteration_plan")
    edited = ran_as_edited(record)
    plan = edited or plan
    approval = site.reports.status()["pending_approval"]
    waits = bool(approval and approval["iteration"] == number)
    steps = task_steps(site, int(record["id"]))
    states = {str(t["key"]): str(t["status"]) for t in act.get("tasks", [])}
    if plan and not states:
        default = "waiting" if waits else ("planned" if record["ended_at"] is None else "not_run")
        states = {str(t["id"]): live_state(steps.get(str(t["id"])), default) for t in plan["tasks"]}
    calls = [{**call, "cache_share": cache_share(call)} for call in record["agent_calls"]]
    return {
        "record": record,
        "orient": orient,
        "act": act,
        "claims": claims,
        "plan": plan,
        "edited": edited is not None,
        "dag": plan_dag(plan["tasks"], states) if plan else None,
        "states": states,
        "waits": waits,
        "approval": approval if waits else None,
        "steps": steps,
        "running": record["ended_at"] is None,
        "tests": _tests(site, claims, act),
        "held": act.get("failing") or {},
        "proof": _proof(record),
        "calls": calls,
        "conclusions": conclusions(calls),
        "total_cost": sum(float(c["cost_usd"]) for c in calls),
    }


LIVE_STATES = {
    "act.task.start": "running",
    "act.task.retried": "running",
    "act.task.completed": "completed",
    "act.task.failed": "failed",
    "act.task.waiting": "waiting",
    "act.task.skipped": "skipped",
}
"""A task's state while ACT runs (its record is written when ACT ends), by its
latest step."""


def ran_as_edited(record: dict[str, Any]) -> dict[str, Any] | None:
    """The plan a person's edit made the iteration run, if one did."""
    for item in record.get("human_inputs") or []:
        if item["kind"] in EDIT_KINDS and item["response"] == EDIT_TAKEN:
            plan: dict[str, Any] | None = item["payload"].get("plan")
            return plan
    return None


def live_state(steps: list[dict[str, Any]] | None, default: str) -> str:
    """The state a running task's latest step says, else `default`."""
    for step in reversed(steps or []):
        if step["kind"] in LIVE_STATES:
            return LIVE_STATES[step["kind"]]
    return default


def task_steps(site: Site, iteration_id: int) -> dict[str, list[dict[str, Any]]]:
    """The iteration's ACT events of each task (by plan key), in order."""
    steps: dict[str, list[dict[str, Any]]] = {}
    for _, ts, _, _, kind, data_json in event_rows.of_iteration(site.db, iteration_id, ("act.",)):
        data = json.loads(data_json)
        if isinstance(data, dict) and data.get("key") is not None:
            details = {k: v for k, v in data.items() if k not in ("key", "plan")}
            steps.setdefault(str(data["key"]), []).append(
                {"ts": ts[11:19], "kind": kind, "data": details}
            )
    return steps


def _tests(site: Site, claims: dict[str, Any], act: dict[str, Any]) -> list[dict[str, Any]]:
    """The gate's runs the iteration stood on: the milestone head it started from
    and each commit it merged, each with its per-test results."""
    commits = []
    head = (claims.get("code") or {}).get("head")
    if head:
        commits.append(("before: the milestone head", head))
    for commit in act.get("merged_commits") or []:
        commits.append(("after: merged", commit))
    runs = []
    for label, commit in commits:
        found = test_results.for_commit(site.db, commit)
        if found is None:
            continue
        summary, report = found
        failures = report.get("failures") or {}
        runs.append(
            {
                "label": label,
                "commit": commit,
                "summary": summary,
                "passed": report.get("passed") or [],
                "failed": [
                    {"name": name, "output": str(failures.get(name) or "")[:TEST_OUTPUT_CHARS]}
                    for name in report.get("failed") or []
                ],
                "skipped": report.get("skipped") or [],
                "problem": report.get("problem"),
            }
        )
    return runs


def _proof(record: dict[str, Any]) -> list[dict[str, Any]]:
    """DONE's confirmation: each acceptance criterion the spec ties to tests, with
    how each of them fared (the iteration report's `proof`)."""
    try:
        report = json.loads(record.get("report_json") or "{}")
    except ValueError:
        return []
    proof = report.get("proof") if isinstance(report, dict) else None
    return [entry for entry in proof or [] if isinstance(entry, dict)]


def conclusions(calls: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Each agent's last answer in the iteration, in the order agents first spoke."""
    found: dict[str, str] = {}
    for call in calls:
        found.setdefault(call["agent"], "")
        for line in call["text"]:
            if line.startswith("answer: "):
                found[call["agent"]] = line.removeprefix("answer: ")
    return [{"agent": agent, "answer": answer} for agent, answer in found.items() if answer]


def tasks_page(site: Site) -> dict[str, Any]:
    """The Tasks page: the milestone's Trace tree, children under parents."""
    items = SqliteTracker(site.db, site.milestone).list()
    children: dict[int | None, list[Task]] = {}
    known = {task.id for task in items}
    for task in items:
        parent = task.parent_id if task.parent_id in known else None
        children.setdefault(parent, []).append(task)
    return {"milestone": site.milestone, "children": children, "count": len(items)}


def event_record(row: EventRow) -> dict[str, Any]:
    """One event for the page and the stream: id, ts, iteration, kind, data's text."""
    record = as_record(row)
    return {
        "id": record["id"],
        "ts": record["ts"],
        "iteration": record["iteration"],
        "kind": record["kind"],
        "text": data_text(record["data"]),
    }


def events_page(site: Site, kind: str | None) -> dict[str, Any]:
    """The Events page: the latest events (of kinds starting with `kind`)."""
    rows = event_rows.latest(site.db, kind or None, EVENTS_SHOWN)
    return {
        "events": [event_record(row) for row in reversed(rows)],
        "kind": kind or "",
        "last_id": rows[-1][0] if rows else event_rows.last_id(site.db),
    }
