"""The house's rules (`soda.LAYERS`), checked on the real import graph of `soda/`.

`check(root)` reads every module's imports with `ast` (function-local and
TYPE_CHECKING imports included: they are dependencies all the same) and reports
an import from a room its row does not allow, a room the table does not know, a
room whose docstring does not state its row, and every circle between modules.
The last tests put each circle and upward import the old layout had back into a
copy of today's tree and show that the check catches it.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

import soda
from soda import ALLOWED_CIRCLES, LAYERS

ROOT = Path(soda.__file__).resolve().parent
SKIPPED = {"__main__"}
"""`python -m soda`: the entry point, which only calls the CLI."""
LOOP_DOORS = frozenset({"soda.loop.host", "soda.loop.policy"})
"""The loop's modules a host or a face may import: the door and the policy. The
`Session` and the phases are the loop's own business."""


def modules(root: Path) -> dict[str, Path]:
    """Dotted name -> file, for every module of the package at `root` (the demo's
    sample project, data without an __init__.py, is not soda's code)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("")
        if not (path.parent / "__init__.py").exists():
            continue
        name = ".".join(rel.parts)
        found[name.removesuffix(".__init__")] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The soda modules `name` imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else base)
    return {m for m in found if m in known and m != name}


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def stated_rule(path: Path) -> str | None:
    """The "May import:" line of a module's docstring, if it has one."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    start = doc.find("May import:")
    if start < 0:
        return None
    end = doc.find(".", start)
    return " ".join(doc[start : end + 1 if end >= 0 else None].split())


def rule_line(name: str) -> str:
    allowed = sorted(LAYERS[name])
    if name == "cli":
        return "May import: every other room."
    return f"May import: {', '.join(allowed)}." if allowed else "May import: nothing of soda."


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected group of two or more modules, as a path (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def check(root: Path) -> list[str]:
    """Every breach of the house's rules in the package at `root`."""
    known = {name: path for name, path in modules(root).items() if room(name) not in SKIPPED}
    graph = {name: imports(name, path, known) for name, path in known.items()}
    problems = []
    rooms = {room(name) for name in known if name != "soda"}
    for name in sorted(rooms - set(LAYERS)):
        problems.append(f"soda.{name} is a room soda.LAYERS does not know")
    for name in sorted(rooms & set(LAYERS)):
        head = known.get(f"soda.{name}")
        stated = stated_rule(head) if head is not None else None
        if stated != rule_line(name):
            problems.append(f"soda.{name}'s docstring says {stated!r}, not {rule_line(name)!r}")
    for source, targets in sorted(graph.items()):
        here = room(source)
        for target in sorted(targets):
            there = room(target)
            if here and there and here != there and there not in LAYERS.get(here, frozenset()):
                problems.append(f"{source} imports {target}: {here} may not import {there}")
    for source, targets in sorted(graph.items()):
        if room(source) == "loop":
            continue
        for target in sorted(targets):
            if room(target) == "loop" and target not in LOOP_DOORS:
                problems.append(
                    f"{source} imports {target}: outside soda/loop/, only the door"
                    " (soda.loop.host) and the policy (soda.loop.policy)"
                )
    cut = {
        name: {t for t in targets if (name, t) not in ALLOWED_CIRCLES}
        for name, targets in graph.items()
    }
    for group in circles(cut):
        problems.append(f"a circle: {' <-> '.join(group)}")
    return problems


def test_the_house_keeps_its_rules() -> None:
    assert check(ROOT) == []


def test_the_top_of_soda_holds_only_a_handful_of_entries() -> None:
    entries = sorted(p.name for p in ROOT.iterdir() if not p.name.startswith(("_", ".")))
    modules_on_top = [name for name in entries if name.endswith(".py")]
    assert modules_on_top == ["errors.py", "events.py", "trace.py"]


def test_every_room_sits_on_lower_rooms_only() -> None:
    """The table is a ladder: no room may import one that may import it back."""
    for name, allowed in LAYERS.items():
        for other in allowed:
            assert name not in LAYERS[other], f"{name} and {other} may import each other"


# --- the check catches what the old layout had ----------------------------------

OLD_BREACHES = [
    # (file, the import the old layout had, what the check must say)
    (
        "cli/app.py",
        "from soda.cli import daemon as _daemon  # registration by side effect",
        "a circle: soda.cli.app <-> soda.cli.daemon",
    ),
    (
        "contracts/orient.py",
        "from soda.contracts.human import HumanInput",
        "a circle: soda.contracts.human <-> soda.contracts.orient",
    ),
    (
        "llm/base.py",
        "from soda.human import QueuedInput  # as ports.py did",
        "soda.llm.base imports soda.human: llm may not import human",
    ),
    (
        "gate/__init__.py",
        "from soda.loop.session import Session",
        "soda.gate imports soda.loop.session: gate may not import loop",
    ),
    (
        "tools/ask.py",
        "from soda.agent.runtime import AgentRunner",
        "soda.tools.ask imports soda.agent.runtime: tools may not import agent",
    ),
    (
        "loop/asking.py",
        "from soda.daemon.parts import rotate_log",
        "soda.loop.asking imports soda.daemon.parts: loop may not import daemon",
    ),
    (
        "store/db.py",
        "from soda.events import Events",
        "soda.store.db imports soda.events: store may not import events",
    ),
    (
        "fleet/iteration.py",
        "from soda.loop.session import Session  # as it wrote four of its fields",
        "soda.fleet.iteration imports soda.loop.session: outside soda/loop/, only the door"
        " (soda.loop.host) and the policy (soda.loop.policy)",
    ),
    (
        "daemon/process.py",
        "from soda.loop.pr import poll_idle",
        "soda.daemon.process imports soda.loop.pr: outside soda/loop/, only the door"
        " (soda.loop.host) and the policy (soda.loop.policy)",
    ),
]


@pytest.mark.parametrize(("file", "line", "said"), OLD_BREACHES, ids=[b[0] for b in OLD_BREACHES])
def test_the_check_catches_each_old_circle_and_upward_import(
    tmp_path: Path, file: str, line: str, said: str
) -> None:
    copy = tmp_path / "soda"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / file
    target.write_text(target.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")
    assert said in check(copy)


def test_the_hosts_hold_the_loop_by_its_door_only() -> None:
    """Nothing outside soda/loop/ reaches behind the door (`Run._session`), and the
    fleet reads no iteration row (the door's report says what it needs)."""
    reach = []
    for name, path in modules(ROOT).items():
        if room(name) == "loop":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(n, ast.Attribute) and n.attr == "_session" for n in ast.walk(tree)):
            reach.append(name)
        if room(name) == "fleet" and "soda.store.history" in imports(name, path, modules(ROOT)):
            reach.append(f"{name} (soda.store.history)")
    assert reach == []


def test_a_new_room_must_be_in_the_table(tmp_path: Path) -> None:
    copy = tmp_path / "soda"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "attic").mkdir()
    (copy / "attic" / "__init__.py").write_text('"""Odds and ends."""\n')
    assert "soda.attic is a room soda.LAYERS does not know" in check(copy)
