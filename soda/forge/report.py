"""The pull request as `soda status` shows it: its state, its checks and the
comments soda took up but has not yet answered (read from the store only: no
request to the forge)."""

from __future__ import annotations

from typing import Any

from sqlite_utils import Database

from soda.forge.pulls import stored_checks
from soda.store import forge as rows


def summary(db: Database, branch: str) -> dict[str, Any] | None:
    """The branch's pull request for `soda status --json`; None without one."""
    row = rows.pull(db, branch)
    if row is None or row.number is None:
        return None
    checks = stored_checks(row)
    comments = [
        {
            "kind": c.item.kind,
            "id": c.item.item_id,
            "author": c.item.author,
            "path": c.item.path,
            "line": c.item.line,
            "input": c.input_id,
            "state": "waits for ORIENT"
            if c.input_status != "applied"
            else f"read in iteration {c.applied_iteration}; the reply waits for a merge",
        }
        for c in rows.corrections(db, row.number, unreplied_only=True)
    ]
    return {
        "number": row.number,
        "url": row.url,
        "state": "merged" if row.merged else row.state,
        "draft": row.draft,
        "head": row.head_sha,
        "pushed": row.pushed_sha,
        "waiting_for_checks": row.done_sha is not None,
        "checks": [{"name": c.name, "conclusion": c.conclusion or "running"} for c in checks],
        "unapplied_comments": comments,
        "ignored_comments": rows.ignored_count(db, row.number),
        "polled_at": row.polled_at,
    }


def lines(pull: dict[str, Any]) -> list[str]:
    """The text `soda status` prints for `summary`'s answer."""
    state = "draft" if pull["draft"] and pull["state"] == "open" else pull["state"]
    out = [f"pull request: #{pull['number']} ({state}) {pull['url'] or ''}".rstrip()]
    checks = pull["checks"]
    if checks:
        failing = [c for c in checks if c["conclusion"] not in ("success", "neutral", "skipped")]
        passed = len(checks) - len(failing)
        named = ", ".join(f"{c['name']}: {c['conclusion']}" for c in failing)
        out.append(f"  checks: {passed} passed" + (f"; {named}" if named else ""))
    else:
        out.append("  checks: none reported")
    if pull["waiting_for_checks"]:
        out.append("  DONE: waits for the checks to pass before it is marked ready")
    for comment in pull["unapplied_comments"]:
        where = f" on {comment['path']}" if comment["path"] else ""
        where += f" line {comment['line']}" if comment["line"] else ""
        out.append(f"  comment by {comment['author']}{where}: {comment['state']}")
    if pull["ignored_comments"]:
        out.append(f"  ignored comments (not from writers): {pull['ignored_comments']}")
    return out
