"""The pictures on the pages, as shapes a template draws in SVG: the plan as a
DAG (tasks in columns by dependency depth, coloured by state) and bar charts
(cost and tokens per iteration, the gate's passed and failed tests). Pure
functions of the data; no styles inline (the CSP allows none): each shape has
a class the stylesheet colours."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

NODE_W, NODE_H, GAP_X, GAP_Y, PAD = 250, 58, 48, 18, 12
TITLE_CHARS = 30
CHART_W, CHART_H, CHART_PAD = 320, 130, 18
BAR_MAX_W = 28.0


@dataclass(frozen=True)
class Node:
    """One task of the plan, placed: its box's top left corner is (x, y)."""

    key: str
    title: str
    short: str
    """The title clipped to fit the box (the whole one is its tooltip)."""
    state: str
    risk: str
    x: int
    y: int


@dataclass(frozen=True)
class Dag:
    """The plan drawn: its size, its tasks and the arrows between them."""

    width: int
    height: int
    nodes: list[Node]
    edges: list[str]
    """SVG path data, one curve from each dependency to its task."""
    node_w: int = NODE_W
    node_h: int = NODE_H


def plan_dag(tasks: Sequence[dict[str, Any]], states: dict[str, str]) -> Dag:
    """The plan's tasks (contract `plan`) laid out left to right: a task's column
    is the length of its longest chain of dependencies. `states` maps a task key
    to its state (unknown keys are `planned`)."""
    keys = [str(task["id"]) for task in tasks]
    deps = {str(task["id"]): [d for d in task.get("depends_on", []) if d in keys] for task in tasks}
    depth: dict[str, int] = {}

    def depth_of(key: str, seen: frozenset[str]) -> int:
        if key not in depth:
            below = [depth_of(d, seen | {key}) for d in deps[key] if d not in seen]
            depth[key] = 1 + max(below) if below else 0
        return depth[key]

    rows: dict[int, int] = {}
    nodes: dict[str, Node] = {}
    for task in tasks:
        key = str(task["id"])
        column = depth_of(key, frozenset())
        row = rows.get(column, 0)
        rows[column] = row + 1
        title = str(task.get("title") or key)
        nodes[key] = Node(
            key=key,
            title=title,
            short=title if len(title) <= TITLE_CHARS else title[: TITLE_CHARS - 1] + "…",
            state=states.get(key, "planned"),
            risk=str(task.get("risk") or ""),
            x=PAD + column * (NODE_W + GAP_X),
            y=PAD + row * (NODE_H + GAP_Y),
        )
    edges = []
    for key, node in nodes.items():
        for dep in deps[key]:
            start = nodes[dep]
            x1, y1 = start.x + NODE_W, start.y + NODE_H // 2
            x2, y2 = node.x, node.y + NODE_H // 2
            middle = (x1 + x2) // 2
            edges.append(f"M{x1},{y1} C{middle},{y1} {middle},{y2} {x2},{y2}")
    columns = max(depth.values(), default=0) + 1
    height = max(rows.values(), default=1)
    return Dag(
        width=2 * PAD + columns * NODE_W + (columns - 1) * GAP_X,
        height=2 * PAD + height * NODE_H + (height - 1) * GAP_Y,
        nodes=list(nodes.values()),
        edges=edges,
    )


@dataclass(frozen=True)
class Bar:
    """One bar (or one part of a stacked bar) of a chart."""

    x: float
    y: float
    width: float
    height: float
    kind: str
    """The class that colours it."""
    label: str
    """Its tooltip: the iteration and the value."""


@dataclass(frozen=True)
class Chart:
    """A bar chart, one bar per iteration, or why there is nothing to draw."""

    title: str
    bars: list[Bar]
    top: str
    """The value at the chart's top line."""
    first: str
    last: str
    """The first and last iterations' numbers, under the axis."""
    empty: str | None
    """Why there is nothing to draw (None when there is)."""
    width: int = CHART_W
    height: int = CHART_H
    pad: int = CHART_PAD


def bar_chart(
    title: str, points: Sequence[tuple[int, Sequence[tuple[str, float]]]], unit: str
) -> Chart:
    """Stacked bars, one per iteration: `points` are (iteration number,
    [(class, value), ...]) in order; `unit` formats the top value (`$`, `tok`,
    `tests`)."""
    top = max((sum(v for _, v in parts) for _, parts in points), default=0.0)
    if not points or top <= 0:
        why = "no iterations yet" if not points else "every iteration is at 0"
        return Chart(title, [], "", "", "", why)
    inner_w, inner_h = CHART_W - 2 * CHART_PAD, CHART_H - 2 * CHART_PAD
    step = inner_w / len(points)
    width = min(BAR_MAX_W, max(1.0, step * 0.7))
    bars = []
    for index, (number, parts) in enumerate(points):
        base = float(CHART_H - CHART_PAD)
        for kind, value in parts:
            height = inner_h * value / top
            base -= height
            x = CHART_PAD + index * step + (step - width) / 2
            bars.append(Bar(x, base, width, height, kind, f"#{number}: {_fmt(value, unit)}"))
    return Chart(title, bars, _fmt(top, unit), f"#{points[0][0]}", f"#{points[-1][0]}", None)


def _fmt(value: float, unit: str) -> str:
    if unit == "$":
        return f"${value:.4f}"
    return f"{value:,.0f} {unit}"


def cache_share(call: dict[str, Any]) -> float:
    """The share of a call's input read from the prompt cache (0 to 1)."""
    read = int(call.get("cache_read_tokens") or 0)
    total = read + int(call.get("input_tokens") or 0) + int(call.get("cache_creation_tokens") or 0)
    return read / total if total else 0.0


def percent(used: float, limit: float | None) -> float:
    """How full a budget is, 0 to 100 (0 with no limit)."""
    if not limit:
        return 0.0
    return max(0.0, min(100.0, 100.0 * used / limit))
