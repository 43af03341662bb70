"""Read-only views of the state database for people: history and iteration detail."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from rich.table import Table
from sqlite_utils import Database

from soda.errors import InputError
from soda.store import events as event_rows
from soda.store import history, human_inputs


def history_table(db: Database, limit: int = 50) -> Table:
    """The last `limit` iterations, oldest first, as a table."""
    table = Table(title="soda history", title_justify="left")
    for column in ("#", "intent", "decision", "outcome", "merged", "time", "tokens", "cost"):
        table.add_column(column, overflow="fold")
    rows = history.latest_iterations(db, limit)
    for number, intent, decision, outcome, merged, duration, tokens, cost, phase in reversed(rows):
        table.add_row(
            str(number),
            _clip(intent or "-", 60),
            decision or f"({phase})",
            outcome or "-",
            (merged or "-")[:10],
            f"{duration:.1f}s" if duration is not None else "-",
            f"{tokens:,}",
            f"${cost:.4f}",
        )
    if not rows:
        table.caption = "no iterations yet: start one with `soda run --once`"
    return table


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def show_iteration(db: Database, number: int) -> str:
    """A plain-text account of iteration `number`."""
    it = history.iteration(db, number)
    if it is None:
        raise InputError(f"no iteration {number} (see `soda history`)")
    lines = [
        f"iteration {number} (run {it['run_id']}), started {it['started_at']}, "
        + (
            f"ended {it['ended_at']}" if it["ended_at"] else f"unfinished, last phase {it['phase']}"
        ),
        f"decision: {it['decision'] or '-'}: {it['decision_reason'] or ''}",
        f"outcome: {it['outcome'] or '-'}"
        + (f", merged {it['merged_commit']}" if it["merged_commit"] else ""),
    ]
    if it.get("progress"):
        lines.append(f"progress: {it['progress']}")
    if it["error"]:
        lines.append(f"error: {it['error']}")
    lines += _claims_summary(it["claims_json"])
    lines += _orient_summary(it["orient_json"])
    lines += _act_summary(it["act_json"])
    from soda.loop.host import report_summary  # the loop's door: `history` needs none of it

    lines += report_summary(it.get("report_json"), db, number)
    lines += _steps_summary(db, it["id"])
    lines += _human_summary(db, number)
    lines += _halt_summary(db, it["id"])
    lines += _calls_summary(db, it["id"])
    return "\n".join(lines)


def _claims_summary(raw: str | None) -> list[str]:
    if not raw:
        return []
    claims = json.loads(raw)
    code, work, human = claims["code"], claims["work"], claims["human"]
    return [
        "",
        "SENSE",
        f"  milestone {code['branch']} at {code['head'][:10]}, "
        f"{code['commits_total']} commits since base",
        f"  tasks: {len(work['open'])} open, {len(work['in_progress'])} in progress, "
        f"{len(work['blocked'])} blocked, {len(work['recently_closed'])} recently closed",
        f"  human inputs pending: {len(human['pending'])}",
    ]


def _orient_summary(raw: str | None) -> list[str]:
    if not raw:
        return []
    o = json.loads(raw)
    lines = [
        "",
        "ORIENT",
        f"  spec satisfied: {o['spec_satisfied']} (confidence {o['confidence']})",
        f"  {o['summary']}",
    ]
    lines += [f"  gap [{g['severity']}]: {g['description']}" for g in o["gaps"]]
    plan = o.get("iteration_plan")
    if plan:
        lines.append(f"  plan: {plan['intent']}")
        for t in plan["tasks"]:
            lines.append(
                f"    {t['id']} -> task #{t['task_id']} [{t['risk']}] {t['title']}"
                + (f" (after {', '.join(t['depends_on'])})" if t["depends_on"] else "")
            )
            if t.get("target_tests"):
                lines.append(f"      target tests: {', '.join(t['target_tests'])}")
            elif t.get("no_target_tests_reason"):
                lines.append(f"      no target tests: {t['no_target_tests_reason']}")
    if o.get("stuck_reason"):
        lines.append(f"  needs a person: {o['stuck_reason']}")
    return lines


def _act_summary(raw: str | None) -> list[str]:
    if not raw:
        return []
    a = json.loads(raw)
    lines = ["", "ACT", f"  {a['outcome']}: {a['detail']}"]
    if a.get("baseline"):
        lines.append(f"  baseline: {a['baseline']}")
    if a.get("after"):
        lines.append(f"  after: {a['after']}")
    lines += [
        f"  task {t['key']} (#{t['task_id']}): {t['status']} {t['reason']}".rstrip()
        for t in a.get("tasks", [])
    ]
    failing = a.get("failing") or {}
    if failing:
        lines.append("  held against the change:")
        for name, text in list(failing.items())[:HELD_SHOWN]:
            first = next((x.strip() for x in str(text).splitlines() if x.strip()), "")
            lines.append(f"    {name}" + (f": {_clip(first, 160)}" if first else ""))
    return lines


HELD_SHOWN = 10
"""Tests (and target tests) the gate held against a change that `soda show` names."""


STEP_KINDS = ("plan.", "act.task.", "executor.")
"""The events `soda show` lists as the iteration's steps: the plan's and each task's
(a coding CLI's too: what it said, the tools it called, what the proxy refused)."""


def _steps_summary(db: Database, iteration_id: int) -> list[str]:
    rows = event_rows.of_iteration(db, iteration_id, STEP_KINDS)
    if not rows:
        return []
    lines = ["", "STEPS"]
    for _, ts, _, _, kind, data_json in rows:
        data = json.loads(data_json)
        details = ", ".join(
            f"{key}={_step_value(value)}" for key, value in data.items() if key != "plan"
        )
        lines.append(f"  {ts[11:19]} {kind:<18} {details}".rstrip())
    return lines


def _step_value(value: object) -> str:
    text = str(value)
    if len(text) == 40 and all(c in "0123456789abcdef" for c in text):
        return text[:10]  # a commit
    return _clip(text, 80)


def _human_summary(db: Database, number: int) -> list[str]:
    rows = human_inputs.applied_in(db, number)
    if not rows:
        return []
    lines = ["", "HUMAN INPUT"]
    for input_id, kind, payload, response in rows:
        text = json.loads(payload).get("text") or ""
        lines.append(f"  #{input_id} {kind}: {_clip(text, 80)}")
        lines.append(f"    -> {_clip(response or '', 100)}")
    return lines


def _halt_summary(db: Database, iteration_id: int) -> list[str]:
    rows = history.halts_in(db, iteration_id)
    lines = []
    for agent, error_type, message, path, rule in rows:
        lines += ["", "HALT", f"  {error_type} from {agent or 'soda'}: {message}"]
        if path:
            lines.append(f"  at {path} (rule {rule})")
    return lines


def _calls_summary(db: Database, iteration_id: int) -> list[str]:
    rows = history.calls_in(db, iteration_id)
    if not rows:
        return []
    lines = [
        "",
        "AGENT CALLS (agent, model, turn: tokens in/out, cache write/read, cost, latency, stop;",
        "then what the agent said, the tools it called and its answer, each clipped)",
    ]
    responses = history.responses_in(db, iteration_id)
    for (agent, model, turn, tin, tout, cw, cr, cost, latency, stop), raw in zip(
        rows, responses, strict=False
    ):
        lines.append(
            f"  {agent:<9} {model} t{turn}: {tin}/{tout} tok, cache {cw}/{cr}, "
            f"${cost:.4f}, {latency} ms, {stop}"
        )
        lines += [f"      {line}" for line in call_text(raw)]
    total = sum(r[7] for r in rows)
    lines.append(f"  {len(rows)} calls, ${total:.4f}")
    return lines


TEXT_WIDTH = 240
"""Characters of an agent's text or answer `soda show` prints per call."""


def call_text(raw: str | None) -> list[str]:
    """What one model call said, in at most three clipped lines: its text, the
    tools it called, and its answer's summary. Reads the raw response of any
    provider (Anthropic content blocks, OpenAI choices, the scripted format)."""
    try:
        response = json.loads(raw) if raw else None
    except ValueError:
        return []
    if not isinstance(response, dict):
        return []
    text, calls = _text_and_calls(response)
    answer: object = None
    tools = []
    for name, arguments in calls:
        if name == "submit":
            answer = arguments
        else:
            tools.append(f"{name}({_clip(_main_argument(arguments), 60)})")
    if answer is None and not calls and text.strip().startswith("{"):
        with contextlib.suppress(ValueError):  # a structured answer given as JSON text
            answer, text = json.loads(text), ""
    lines = []
    if text.strip():
        lines.append(f"says: {_clip(text, TEXT_WIDTH)}")
    if tools:
        lines.append(f"calls: {_clip(', '.join(tools), TEXT_WIDTH)}")
    if answer is not None:
        lines.append(f"answer: {_clip(_answer_summary(answer), TEXT_WIDTH)}")
    return lines


def _text_and_calls(response: dict[str, Any]) -> tuple[str, list[tuple[str, object]]]:
    if isinstance(response.get("content"), list):  # Anthropic Messages
        blocks = [b for b in response["content"] if isinstance(b, dict)]
        text = " ".join(str(b.get("text") or "") for b in blocks if b.get("type") == "text")
        calls = [
            (str(b.get("name")), b.get("input")) for b in blocks if b.get("type") == "tool_use"
        ]
        return text, calls
    if isinstance(response.get("choices"), list) and response["choices"]:  # OpenAI-compatible
        message = response["choices"][0].get("message") or {}
        calls = []
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except ValueError:
                arguments = function.get("arguments")
            calls.append((str(function.get("name")), arguments))
        return str(message.get("content") or ""), calls
    calls = [  # the scripted provider
        (str(c.get("name")), c.get("input"))
        for c in response.get("tool_calls") or []
        if isinstance(c, dict)
    ]
    return str(response.get("text") or ""), calls


def _main_argument(arguments: object) -> str:
    """The argument that says most about a tool call: its path, command or pattern."""
    if not isinstance(arguments, dict):
        return str(arguments)
    for key in ("path", "command", "pattern", "query"):
        if arguments.get(key):
            return str(arguments[key])
    return ", ".join(f"{k}={v}" for k, v in arguments.items() if v is not None)


def _answer_summary(answer: object) -> str:
    """An answer's own summary (most contracts have one), else the plan's intent
    or the reason it needs a person, else the answer as compact JSON."""
    if isinstance(answer, dict):
        plan = answer.get("iteration_plan")
        for value in (
            answer.get("summary"),
            plan.get("intent") if isinstance(plan, dict) else None,
            answer.get("stuck_reason"),
        ):
            if isinstance(value, str) and value.strip():
                return value
    return json.dumps(answer, separators=(",", ":"), default=str)


# --- the same, for scripts (--json) -------------------------------------------

HISTORY_KEYS = (
    "number",
    "intent",
    "decision",
    "outcome",
    "merged_commit",
    "duration_s",
    "tokens",
    "cost_usd",
    "phase",
)


def history_json(db: Database, limit: int = 50) -> dict[str, object]:
    """`soda history --json`: {"iterations": [...]}, oldest first, keys HISTORY_KEYS."""
    rows = history.latest_iterations(db, limit)
    return {"iterations": [dict(zip(HISTORY_KEYS, row, strict=True)) for row in reversed(rows)]}


JSON_COLUMNS = {"claims_json": "claims", "orient_json": "orient", "act_json": "act"}


def iteration_json(db: Database, number: int) -> dict[str, object]:
    """`soda show N --json`: the iteration's record (its JSON columns decoded, as
    claims, orient and act), the human inputs it applied, its halts and its model
    calls, each with what the agent said (`text`: the lines `soda show` prints)."""
    it = history.iteration(db, number)
    if it is None:
        raise InputError(f"no iteration {number} (see `soda history`)")
    record: dict[str, object] = {}
    for key, value in it.items():
        if key in JSON_COLUMNS:
            record[JSON_COLUMNS[key]] = json.loads(value) if value else None
        else:
            record[key] = value
    record["human_inputs"] = [
        {"id": input_id, "kind": kind, "payload": json.loads(payload), "response": response}
        for input_id, kind, payload, response in human_inputs.applied_in(db, number)
    ]
    halt_keys = ("agent", "error_type", "message", "violation_path", "violation_rule")
    record["steps"] = [
        {"ts": ts, "kind": kind, "data": json.loads(data_json)}
        for _, ts, _, _, kind, data_json in event_rows.of_iteration(db, it["id"], STEP_KINDS)
    ]
    record["halts"] = [
        dict(zip(halt_keys, row, strict=True)) for row in history.halts_in(db, it["id"])
    ]
    call_keys = (
        "agent",
        "model",
        "turn",
        "input_tokens",
        "output_tokens",
        "cache_creation_tokens",
        "cache_read_tokens",
        "cost_usd",
        "latency_ms",
        "stop_reason",
    )
    calls = history.calls_in(db, it["id"])
    responses = history.responses_in(db, it["id"])
    record["agent_calls"] = [
        {**dict(zip(call_keys, row, strict=True)), "text": call_text(raw)}
        for row, raw in zip(calls, responses, strict=False)
    ]
    return record
