"""Process trees, read from /proc: what runs below a process, to end all of it
(a jail's inner processes, a daemon's commands) when its group is not enough."""

from __future__ import annotations

from pathlib import Path


def descendants(pid: int) -> list[int]:
    """Every live process below `pid`, read from /proc (none elsewhere)."""
    proc_dir = Path("/proc")
    children: dict[int, list[int]] = {}
    for entry in proc_dir.iterdir() if proc_dir.is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text(errors="replace").rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # exited while we looked
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
