"""The report: a table per task with totals, or one JSON object (`--json`)."""

from __future__ import annotations

from typing import Any

from bench.effectiveness.harness import TaskResult

COLUMNS = (
    ("task", "<"),
    ("difficulty", "<"),
    ("solved", "<"),
    ("iter", ">"),
    ("tokens in", ">"),
    ("tokens out", ">"),
    ("cost USD", ">"),
    ("wall s", ">"),
    ("ending", "<"),
)


def totals(rows: list[TaskResult]) -> dict[str, Any]:
    """The suite's sums and its solve rate (0 for an empty suite)."""
    solved = sum(row.solved for row in rows)
    return {
        "tasks": len(rows),
        "solved": solved,
        "solve_rate": round(solved / len(rows), 4) if rows else 0.0,
        "iterations": sum(row.iterations for row in rows),
        "calls": sum(row.calls for row in rows),
        "tokens_in": sum(row.tokens_in for row in rows),
        "tokens_out": sum(row.tokens_out for row in rows),
        "cost_usd": round(sum(row.cost_usd for row in rows), 6),
        "wall_s": round(sum(row.wall_s for row in rows), 2),
    }


def as_json(rows: list[TaskResult], model: dict[str, Any]) -> dict[str, Any]:
    """`{"model": ..., "tasks": [row, ...], "totals": {...}}`."""
    return {"model": model, "tasks": [row.to_json() for row in rows], "totals": totals(rows)}


def _cells(row: TaskResult) -> list[str]:
    return [
        row.task,
        row.difficulty,
        "yes" if row.solved else "no",
        str(row.iterations),
        f"{row.tokens_in:,}",
        f"{row.tokens_out:,}",
        f"{row.cost_usd:.4f}",
        f"{row.wall_s:.1f}",
        row.ending,
    ]


def table(rows: list[TaskResult], model_label: str) -> str:
    """The per-task table, a totals line, and why each unsolved task failed."""
    sums = totals(rows)
    body = [_cells(row) for row in rows]
    rate = f"{sums['solved']}/{sums['tasks']} ({sums['solve_rate']:.0%})"
    total = [
        "total",
        f"{sums['tasks']} tasks",
        rate,
        str(sums["iterations"]),
        f"{sums['tokens_in']:,}",
        f"{sums['tokens_out']:,}",
        f"{sums['cost_usd']:.4f}",
        f"{sums['wall_s']:.1f}",
        "",
    ]
    header = [name for name, _ in COLUMNS]
    widths = [max(len(r[i]) for r in [header, *body, total]) for i in range(len(COLUMNS))]

    def line(cells: list[str]) -> str:
        parts = [
            cell.ljust(width) if align == "<" else cell.rjust(width)
            for cell, width, (_, align) in zip(cells, widths, COLUMNS, strict=True)
        ]
        return "  ".join(parts).rstrip()

    out = [f"model: {model_label}", "", line(header), line(["-" * w for w in widths])]
    out += [line(cells) for cells in body]
    out += [line(["-" * w for w in widths]), line(total)]
    unsolved = [row for row in rows if not row.solved]
    if unsolved:
        out += ["", "unsolved:"]
        for row in unsolved:
            out.append(f"  {row.task} ({row.ending}): {row.reason or 'no reason given'}")
            if row.acceptance is not None:
                out.append(f"    acceptance: {row.acceptance.summary}")
    kept = [row for row in rows if row.workdir]
    if kept:
        out += ["", "kept (run `soda history` or `soda show N` in a repo):"]
        out += [f"  {row.task}: {row.workdir}/repo" for row in kept]
    return "\n".join(out)
