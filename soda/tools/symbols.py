"""The symbols the repository map shows of a Python file: one line per public
top-level class (with its public methods) and function, from `ast`; and the
process's cache of them by content (a git blob id), shared by every map (the
tool's, in ORIENT and the executor, and the map of a commit in ORIENT's first
messages)."""

from __future__ import annotations

import ast
import threading
import warnings
from collections import OrderedDict

MAX_PARSE_BYTES = 1_000_000
"""Python files larger than this are listed without symbols (generated, or data)."""
MAX_SIGNATURE_CHARS = 100
CACHE_ENTRIES = 50_000


class SymbolCache:
    """Symbols per content id (a git blob id), least recently used dropped past
    `max_entries`. `parses` counts files parsed (or found past MAX_PARSE_BYTES),
    `hits` answers from the cache."""

    def __init__(self, max_entries: int = CACHE_ENTRIES) -> None:
        self.max_entries = max_entries
        self.parses = 0
        self.hits = 0
        self._entries: OrderedDict[str, tuple[str, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> tuple[str, ...] | None:
        with self._lock:
            symbols = self._entries.get(key)
            if symbols is not None:
                self._entries.move_to_end(key)
                self.hits += 1
            return symbols

    def parse(self, key: str, source: bytes) -> tuple[str, ...]:
        """The symbols of `source`, kept under `key`; none for a file too large."""
        symbols = python_symbols(source) if len(source) <= MAX_PARSE_BYTES else ()
        with self._lock:
            self.parses += 1
            self._entries[key] = symbols
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return symbols

    def __len__(self) -> int:
        return len(self._entries)


SYMBOLS = SymbolCache()
"""The process's cache: every map shares it (ORIENT's agents, the executor)."""


def python_symbols(source: bytes) -> tuple[str, ...]:
    """One line per public top-level class and function of a Python module; empty
    when it does not parse."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning on odd escapes: not ours to report
            tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    symbols = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if not node.name.startswith("_"):
                symbols.append(_clip(_signature(node)))
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            symbols.append(_clip(_class_line(node)))
    return tuple(symbols)


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    keyword = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    line = f"{keyword} {node.name}({_unparse(node.args)})"
    if node.returns is not None:
        line += f" -> {_unparse(node.returns)}"
    return line


def _class_line(node: ast.ClassDef) -> str:
    bases = [_unparse(base) for base in node.bases] + [_unparse(kw) for kw in node.keywords]
    line = f"class {node.name}({', '.join(bases)})" if bases else f"class {node.name}"
    methods = [
        item.name
        for item in node.body
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
        and not item.name.startswith("_")
    ]
    return f"{line}: {', '.join(methods)}" if methods else line


def _unparse(node: ast.AST) -> str:
    try:
        return " ".join(ast.unparse(node).split())
    except Exception:  # ast.unparse has no complete error contract
        return "..."


def _clip(line: str) -> str:
    return line if len(line) <= MAX_SIGNATURE_CHARS else line[: MAX_SIGNATURE_CHARS - 3] + "..."
