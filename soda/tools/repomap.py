"""The repository map: an overview of a checkout that fits a token budget.

`repo_map(root, budget_tokens)` lists the files git shows (tracked, plus untracked
files `.gitignore` does not exclude: `git ls-files`, so ignored trees such as
`node_modules` or `.venv` never appear), each Python file with its public
top-level classes and functions as one-line signatures (from `ast`; a class line
also names its public methods). Other files are listed by path only. Outside a
git checkout the sandbox's walk supplies the files instead.

Ranking, most relevant first (the map is cut at the budget, so the tail goes):

0. the project's front door at the top level: README* first, then
   pyproject.toml, setup.py, setup.cfg, package.json, Cargo.toml, go.mod, ...;
1. source: code files in a Python package (a directory with `__init__.py`) or
   under a top-level `src/` or `lib/`;
2. other code files (scripts in `bin/`, `tools/`, ...);
3. other files (configuration, data), and anything under a hidden directory
   (`.github/`, `.ci/`);
4. tests, docs, examples, benchmarks (`tests/`, `docs/`, `test_*.py`,
   `conftest.py`, ...);
5. lock files, vendored code, minified and binary assets.

Within a rank: shallower paths first, then files with more symbols, then by
path. The map is rendered in that order, one full path per file (so it can be
passed to read_file as it is), symbols indented below it (at most 10 a file,
each line clipped); it is cut at about four characters per token and ends with
a line saying how many files were left out (the budget keeps a fixed room for
that line, so the lines above it never depend on the count). The same map of a
commit's tree, for an agent's first message, is `soda.tools.treemap`.

Symbols (`soda.tools.symbols`) are cached in memory by content: a tracked file
unchanged in the work tree by its blob id from `git ls-files --stage`, anything
else by the git blob id of the bytes read. A second map of a similar tree parses
only what changed (`SymbolCache.parses` counts the parses). Files are read only when their
symbols are not cached, through the sandbox's checks (regular files only, never
a FIFO or device), and only as far as the ranking needs: a group of files of
equal rank and depth past the cut is never parsed.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Iterable, Set
from dataclasses import dataclass
from pathlib import Path

from soda.llm.base import ToolSpec
from soda.tools.fileio import open_regular
from soda.tools.listing import git_listing, vetted, walk
from soda.tools.sandbox import Sandbox, ToolError
from soda.tools.symbols import MAX_PARSE_BYTES, SYMBOLS, SymbolCache
from soda.tools.toolbox import DIR_PATH, Tool, described, object_schema

CHARS_PER_TOKEN = 4
MAX_SYMBOLS_PER_FILE = 10
TOOL_HINT = "pass a directory as path, or use list_files"
"""What the tool's last line says to do about the files left out."""
FOOTER_ROOM = len(f"[{10**7} of {10**7} files left out; {TOOL_HINT}]") + 1
"""Characters the budget keeps for the last line, whatever it will say: a fixed
room, so the lines above it never depend on how many files were left out (a file
added past the cut leaves them as they were)."""


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


FRONT_DOOR = (
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "package.json",
    "cargo.toml",
    "go.mod",
    "pom.xml",
    "build.gradle",
    "gemfile",
    "makefile",
    "cmakelists.txt",
)
"""Top-level files that say what the project is, after any README*, in this order."""
SOURCE_ROOTS = _words("src lib")
"""Top-level directories whose code is the project's source, in any language."""
CODE_SUFFIXES = _words(
    ".py .pyi .pyx .js .jsx .mjs .cjs .ts .tsx .go .rs .java .kt .kts .scala .c .h .cc .cpp "
    ".cxx .hpp .hh .cs .rb .php .swift .m .mm .lua .pl .pm .r .jl .ex .exs .erl .hs .ml "
    ".clj .dart .zig .nim .sh .bash .sql .vue .svelte"
)
SECONDARY_DIRS = _words(
    "test tests testing doc docs documentation example examples bench benchmark benchmarks fixtures"
)
LAST_DIRS = _words("vendor vendored third_party thirdparty external extern")
LAST_SUFFIXES = _words(
    ".lock .min.js .min.css .map .png .jpg .jpeg .gif .ico .svg .pdf .zip .gz .tgz .bz2 .xz "
    ".whl .jar .woff .woff2 .ttf .otf .eot .mp3 .mp4 .wav .bin .so .dll .dylib .exe .pyc"
)
_LAST_SUFFIXES = tuple(LAST_SUFFIXES)
LOCK_FILES = frozenset(
    {"package-lock.json", "yarn.lock", "pnpm-lock.yaml", "poetry.lock", "uv.lock", "go.sum"}
)


@dataclass
class MapFile:
    """A file as the map ranks and renders it."""

    path: str  # relative to the root, posix
    blob: str | None  # its blob id, when known (a tracked file unchanged in the work tree)
    rank: int
    depth: int
    symbols: tuple[str, ...] = ()

    @property
    def is_python(self) -> bool:
        return self.path.endswith((".py", ".pyi"))


def repo_map_tools(sandbox: Sandbox, budget_tokens: int) -> list[Tool]:
    return [
        Tool(
            ToolSpec(
                "repo_map",
                "An overview of the repository in about "
                f"{budget_tokens} tokens: its files (those git ignores left out), most "
                "relevant first (project files, then source, then tests and docs; shallow "
                "before deep), each Python file with its public top-level classes and "
                "functions as one-line signatures. Call it first to find your way around (unless "
                "your input holds this map already), then read_file what it names. The last "
                "line says how many files did not fit; give path to map one directory in more "
                "detail.",
                object_schema({"path": described(["string", "null"], DIR_PATH)}),
            ),
            lambda a: _tool(sandbox, budget_tokens, a["path"]),
        )
    ]


def _tool(sandbox: Sandbox, budget_tokens: int, path: str | None) -> str:
    target = sandbox.resolve(path or ".")
    if not target.exists():
        raise ToolError(f"{path} does not exist")
    prefix = None if target == sandbox.root else sandbox.relative(target)
    return repo_map(sandbox.root, budget_tokens, prefix=prefix, sandbox=sandbox)


def repo_map(
    root: Path,
    budget_tokens: int,
    *,
    prefix: str | None = None,
    sandbox: Sandbox | None = None,
    cache: SymbolCache = SYMBOLS,
) -> str:
    """The map of the checkout at `root` (only files under `prefix`, a path
    relative to it, when given) in at most `budget_tokens` * 4 characters. Files
    are read through `sandbox` (default: one rooted at `root`, .git denied)."""
    sandbox = sandbox or Sandbox(root)
    files = _files(sandbox, prefix)
    if not files:
        return "(no files)"
    shown = listing(files, budget_tokens, lambda file: _symbols(sandbox, file, cache))
    return "\n".join([*shown.lines, footer(len(files) - shown.count, len(files), TOOL_HINT)])


@dataclass(frozen=True)
class Listing:
    """The map's lines above its last one, and what decided them."""

    lines: tuple[str, ...]
    count: int
    """Files shown."""
    cut: tuple[int, int] | None
    """The (rank, depth) group the budget ran out in; None when every file is shown.
    Files of a later group cannot change the listing (they are never reached)."""


def listing(
    files: list[MapFile], budget_tokens: int, symbols_of: Callable[[MapFile], tuple[str, ...]]
) -> Listing:
    """The files, ranked (see the module's docstring) and rendered until the budget
    runs out, less FOOTER_ROOM for the last line. `symbols_of` gives a Python
    file's symbols; it is asked only for the groups the cut reaches."""
    budget = max(budget_tokens, 0) * CHARS_PER_TOKEN - FOOTER_ROOM
    files = sorted(files, key=lambda f: (f.rank, f.depth))
    lines: list[str] = []
    used, shown = 0, 0
    for key, group_iter in itertools.groupby(files, key=lambda f: (f.rank, f.depth)):
        group = list(group_iter)
        for file in group:
            if file.is_python:
                file.symbols = symbols_of(file)
        if group[0].rank == 0:
            group.sort(key=lambda f: (_front_door_order(f.path), f.path))
        else:
            group.sort(key=lambda f: (-len(f.symbols), f.path))
        for file in group:
            block = _render(file)
            size = sum(len(line) + 1 for line in block)
            if used + size > budget and len(block) > 1:
                block = [f"{file.path}  [{len(file.symbols)} symbols]"]
                size = len(block[0]) + 1
            if used + size > budget:
                return Listing(tuple(lines), shown, key)
            lines += block
            used += size
            shown += 1
    return Listing(tuple(lines), shown, None)


def footer(left_out: int, total: int, hint: str) -> str:
    """The map's last line: how many files it left out of how many, and `hint`."""
    if not left_out:
        return f"[{total} file{'s' if total != 1 else ''}, all shown]"
    return f"[{left_out} of {total} files left out; {hint}]"


def _render(file: MapFile) -> list[str]:
    lines = [file.path]
    lines += [f"  {symbol}" for symbol in file.symbols[:MAX_SYMBOLS_PER_FILE]]
    if len(file.symbols) > MAX_SYMBOLS_PER_FILE:
        lines.append(f"  ... {len(file.symbols) - MAX_SYMBOLS_PER_FILE} more")
    return lines


def _files(sandbox: Sandbox, prefix: str | None) -> list[MapFile]:
    """Every file the map may show, with its rank, under `prefix`."""
    root = sandbox.root
    entries = git_listing(root, "--stage", "--modified")
    if entries is None:
        paths = [sandbox.relative(file) for file in walk(sandbox, root)]
        blobs: dict[str, str | None] = dict.fromkeys(paths)
    else:
        blobs = _blobs(entries)
        blobs = {path: blobs[path] for path in vetted(sandbox, root, sorted(blobs))}
    packages = {path.rpartition("/")[0] for path in blobs if path.endswith("/__init__.py")}
    if prefix is not None:
        blobs = {
            path: blob
            for path, blob in blobs.items()
            if path == prefix or path.startswith(prefix + "/")
        }
    return [
        MapFile(path, blob, rank(path, packages), path.count("/"))
        for path, blob in sorted(blobs.items())
    ]


def _blobs(entries: Iterable[str]) -> dict[str, str | None]:
    """Path -> blob id from `ls-files --stage --modified --others` entries; None
    for untracked files and for tracked ones whose work tree copy may differ
    (listed more than once: modified, or unmerged)."""
    blobs: dict[str, str | None] = {}
    for entry in entries:
        meta, tab, path = entry.partition("\t")
        if not tab:  # untracked, or a --modified line
            path, blob = entry, None
        else:
            mode, blob, _stage = meta.split(" ")
            if mode in ("120000", "160000"):
                blob = None  # a symlink or a submodule: nothing to parse by id
        blobs[path] = None if path in blobs else blob
    return blobs


def rank(path: str, packages: Set[str] = frozenset()) -> int:
    """The file's rank (see the module's docstring): 0 front door, 1 source in a
    package or a source root, 2 other code, 3 other files, 4 tests, docs, examples
    and benchmarks, 5 lock files, vendored code and binary assets. `packages` are
    the directories holding an `__init__.py`."""
    parent, _, name = path.rpartition("/")
    name = name.lower()
    dirs = parent.lower().split("/") if parent else []
    if not dirs and (name.startswith("readme") or name in FRONT_DOOR):
        return 0
    if name in LOCK_FILES or LAST_DIRS.intersection(dirs) or name.endswith(_LAST_SUFFIXES):
        return 5
    if (
        SECONDARY_DIRS.intersection(dirs)
        or name.startswith("test_")
        or name.endswith(("_test.py", "_test.go", ".test.js", ".test.ts", ".spec.ts"))
        or name == "conftest.py"
    ):
        return 4
    _, dot, suffix = name.rpartition(".")
    if not dot or f".{suffix}" not in CODE_SUFFIXES or any(d.startswith(".") for d in dirs):
        return 3
    if parent in packages or (dirs and dirs[0] in SOURCE_ROOTS):
        return 1
    return 2


def _front_door_order(path: str) -> int:
    name = path.lower()
    return -1 if name.startswith("readme") else FRONT_DOOR.index(name)


def _symbols(sandbox: Sandbox, file: MapFile, cache: SymbolCache) -> tuple[str, ...]:
    if file.blob is not None:
        cached = cache.get(file.blob)
        if cached is not None:
            return cached
    try:
        with open(open_regular(sandbox.root / file.path, file.path), "rb") as f:
            source = f.read(MAX_PARSE_BYTES + 1)
    except (OSError, ToolError):
        return ()  # a symlink, or gone since git listed it: listed without symbols
    if len(source) > MAX_PARSE_BYTES:
        return ()
    key = file.blob or _blob_id(source)
    cached = cache.get(key)
    if cached is not None:
        return cached
    return cache.parse(key, source)


def _blob_id(data: bytes) -> str:
    """What git would name these bytes as a blob (SHA-1 object format)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()
