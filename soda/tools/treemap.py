"""The repository map of a commit, given to the agents that plan in their first message.

The planner (and the orienter) get the map of the milestone tip as an input
(`repo_map`) instead of calling the `repo_map` tool for it: a tool's answer
comes after the first message, where no prompt cache can keep it, while an
input has its place among the parts that last. The tool stays for a closer map
of one directory.

The map is built from git's objects, not from a checkout: it is a function of
the commit's tree alone, the same text for the same tree in any process. It
lists what the tool lists in a clean checkout of that commit (regular files and
symlinks; no submodules, nothing under `.git` or a noise directory such as
`node_modules`), ranked and rendered the same way (`soda.tools.repomap.listing`),
with symbols from the process's `SymbolCache`, by blob id.

It comes in two parts (`RepoMap.prompt_parts`): the listing, which changes only
when a file it shows (or a file that would now be shown) changes, and the last
line, which counts the files and so changes whenever any file comes or goes.
The first message puts the listing among what lasts, with a cache marker after
it, and the count with what changes every iteration.

What it costs: the files of the last tree mapped are kept per repository and
budget. The next tree's files are those moved forward by what differs between
the two trees (`soda.repo.objects.changed_paths`, which reads only the trees the
change touches), and the listing is kept as it was when every change falls in a
group of files (rank and depth) past its cut, where the listing never reached,
and no `__init__.py` (which makes a package, and so ranks other files) comes or
goes. Anything else builds the listing again from the kept files (symbols from
the cache); a first map, or a change too large to follow, reads the whole tree
(`git ls-tree -r`, one process).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, replace

from git import GitCommandError, Repo

from soda.repo import objects
from soda.tools.listing import NOISE_DIRS
from soda.tools.repomap import Listing, MapFile, footer, listing, rank
from soda.tools.symbols import SYMBOLS, SymbolCache

MESSAGE_HINT = "call repo_map with a directory as path for a closer map, or use list_files"
"""The last line's advice when files were left out."""
MAX_CHANGES = 2_000
"""Changes between two trees followed one by one; past this the tree is read whole."""
KEPT = 8
"""Repositories (and budgets) whose last map is kept."""
SYMLINK_MODE = 0o120000
FILE_TYPE_MASK = 0o170000
REGULAR_FILE = 0o100000


@dataclass(frozen=True)
class RepoMap:
    """The map of a commit as an agent's input: the listing (lasting), then the
    count of files shown and left out (changing); see the module's docstring."""

    listing: str
    counts: str

    def prompt_parts(self) -> tuple[str, str]:
        return self.listing, self.counts

    def prompt_text(self) -> str:
        return "\n".join(part for part in self.prompt_parts() if part)

    def halved(self) -> RepoMap:
        """The map with the last half of its listing's lines left out (they are the
        least relevant files), to fit a small context window."""
        lines = self.listing.splitlines()
        return replace(self, listing="\n".join(lines[: len(lines) // 2]))


Files = dict[str, str | None]
"""The files a map may show: path -> blob id (None for a symlink: nothing to parse)."""


@dataclass(frozen=True)
class _Kept:
    """What is kept of the last map of a repository: its tree, files and listing."""

    tree: str
    files: Files
    packages: frozenset[str]
    shown: Listing


class TreeMaps:
    """Maps of commits' trees, the last one kept per repository and budget.
    `trees_read` counts whole trees read, `listings` listings built."""

    def __init__(self, cache: SymbolCache = SYMBOLS) -> None:
        self.cache = cache
        self.trees_read = 0
        self.listings = 0
        self._kept: OrderedDict[tuple[str, int], _Kept] = OrderedDict()
        self._lock = threading.Lock()

    def map(self, repo: Repo, tree: str, budget_tokens: int) -> RepoMap:
        """The map of `tree` (a tree id in `repo`) in about `budget_tokens` tokens."""
        key = (str(repo.git_dir), budget_tokens)
        with self._lock:
            last = self._kept.get(key)
        try:
            kept = self._advance(repo, last, tree, budget_tokens)
        except GitCommandError as exc:
            return RepoMap("", f"(no map: git could not list tree {tree[:10]}: {exc.status})")
        with self._lock:
            self._kept[key] = kept
            self._kept.move_to_end(key)
            while len(self._kept) > KEPT:
                self._kept.popitem(last=False)
        total = len(kept.files)
        if not total:
            return RepoMap("", "(no files)")
        counts = footer(total - kept.shown.count, total, MESSAGE_HINT)
        return RepoMap("\n".join(kept.shown.lines), counts)

    def _advance(self, repo: Repo, last: _Kept | None, tree: str, budget: int) -> _Kept:
        """The kept map of `tree`, from the last one when it can be moved forward."""
        if last is not None and last.tree == tree:
            return last
        changes = None
        if last is not None:
            try:
                changes = objects.changed_paths(repo, last.tree, tree, MAX_CHANGES)
            except objects.Undecided:
                changes = None
        if last is None or changes is None:
            return self._build(repo, tree, self._read(repo, tree), budget)
        files = dict(last.files)
        reached = False
        for change in changes:
            before, after = _listed(change.path, change.old), _listed(change.path, change.new)
            if not (before or after):
                continue
            if after and change.new is not None:
                files[change.path] = _blob(change.new)
            else:
                files.pop(change.path, None)
            reached = reached or _reaches(last, change.path, before and after)
        if reached:
            return self._build(repo, tree, files, budget)
        return replace(last, tree=tree, files=files)

    def _read(self, repo: Repo, tree: str) -> Files:
        """Every file of `tree` a map may show (one `git ls-tree -r`)."""
        self.trees_read += 1
        out = repo.git.ls_tree("-r", "-z", "--full-tree", tree, stdout_as_string=False)
        files: Files = {}
        for entry in bytes(out).split(b"\0"):
            meta, tab, raw_path = entry.partition(b"\t")
            if not tab:
                continue
            mode, _kind, sha = meta.split(b" ")
            try:
                path = raw_path.decode("utf-8")
            except UnicodeDecodeError:
                continue  # a name no tool could be given: never shown
            parsed = (int(mode, 8), sha.decode())
            if _listed(path, parsed):
                files[path] = _blob(parsed)
        return files

    def _build(self, repo: Repo, tree: str, files: Files, budget: int) -> _Kept:
        self.listings += 1
        packages = frozenset(path.rpartition("/")[0] for path in files if _is_init(path))
        entries = [
            MapFile(path, blob, rank(path, packages), path.count("/"))
            for path, blob in sorted(files.items())
        ]
        shown = listing(entries, budget, lambda file: self._symbols(repo, file.blob))
        return _Kept(tree, files, packages, shown)

    def _symbols(self, repo: Repo, blob: str | None) -> tuple[str, ...]:
        if blob is None:
            return ()
        cached = self.cache.get(blob)
        if cached is not None:
            return cached
        try:
            source = objects.read(repo, blob, "blob")
        except objects.Undecided:
            return ()
        return self.cache.parse(blob, source)


TREE_MAPS = TreeMaps()
"""The process's maps: ORIENT's, across iterations (and runs) of every project."""


def _listed(path: str, entry: objects.Entry | None) -> bool:
    """Whether a tree entry is a file the map may show."""
    if entry is None:
        return False
    mode = entry[0]
    if mode != SYMLINK_MODE and mode & FILE_TYPE_MASK != REGULAR_FILE:
        return False  # a submodule (or a directory)
    *dirs, name = path.split("/")
    return name.casefold() != ".git" and not any(
        part.casefold() == ".git" or part in NOISE_DIRS for part in dirs
    )


def _blob(entry: objects.Entry) -> str | None:
    return None if entry[0] == SYMLINK_MODE else entry[1]


def _is_init(path: str) -> bool:
    return path.endswith("/__init__.py")


def _reaches(last: _Kept, path: str, modified: bool) -> bool:
    """Whether a change to the file at `path` may change `last`'s listing: a package
    made or unmade, or a file in a group the listing reached (its cut's or an
    earlier one), unless only the content of a file shown by its path alone
    (not Python) changed."""
    if _is_init(path):
        return True
    cut = last.shown.cut
    if cut is not None and (rank(path, last.packages), path.count("/")) > cut:
        return False
    return not (modified and not path.endswith((".py", ".pyi")))
