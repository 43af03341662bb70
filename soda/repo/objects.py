"""Reading git objects without a git process per question.

Every git process costs a fork of a large Python process (several
milliseconds); an iteration asks git dozens of small questions whose answers are
in the object database: a commit's tree and parents, a tree's entries, whether
a path is tracked. GitPython answers them through one long-lived
`git cat-file --batch` per `Repo` (started on the first read), so a read costs a
pipe round trip. That process is not thread-safe, so every read here holds one
lock (ACT's task threads share the session's repository).

Anything these readers cannot decide exactly (an object that is missing, a name
that is not UTF-8, a commit in another encoding, a walk past its limit) comes
back as `Undecided`, and the caller asks git itself.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from git import Repo

_LOCK = threading.Lock()

TREE_MODE = 0o040000
GITLINK_MODE = 0o160000


class Undecided(Exception):
    """The object database cannot answer this exactly: ask git."""


def read(repo: Repo, sha: str, kind: str) -> bytes:
    """The content of object `sha`, which must be a `kind` (commit, tree, blob)."""
    with _LOCK:
        try:
            _, typename, _, data = repo.git.get_object_data(sha)
        except Exception as exc:  # missing, or the helper process died: ask git
            if not isinstance(exc, ValueError):  # not just a missing object: a new helper
                repo.git.clear_cache()
            raise Undecided(f"cannot read {sha}: {exc}") from exc
    if isinstance(typename, bytes):
        typename = typename.decode()
    if typename != kind:
        raise Undecided(f"{sha} is a {typename}, not a {kind}")
    return bytes(data)


@dataclass(frozen=True)
class CommitInfo:
    """What soda reads of a commit, in the form `git log` prints it."""

    sha: str
    tree: str
    parents: tuple[str, ...]
    committed: int
    """Committer time (seconds since the epoch): the order of the milestone's log."""
    author: str
    """%an"""
    date: str
    """%aI: the author date, strict ISO 8601 in the author's time zone."""
    subject: str
    """%s: the message's first paragraph, its lines joined by spaces."""


def commit_info(repo: Repo, sha: str) -> CommitInfo:
    data = read(repo, sha, "commit")
    head, _, message = data.partition(b"\n\n")
    tree = ""
    parents: list[str] = []
    author = committer = b""
    for line in head.split(b"\n"):
        key, _, value = line.partition(b" ")
        if key == b"tree":
            tree = value.decode()
        elif key == b"parent":
            parents.append(value.decode())
        elif key == b"author":
            author = value
        elif key == b"committer":
            committer = value
        elif key == b"encoding" and value.strip().lower() not in (b"utf-8", b"utf8"):
            raise Undecided(f"{sha} is encoded in {value.decode(errors='replace')}")
    if not tree or not author or not committer:
        raise Undecided(f"{sha} is not a commit soda can read")
    name, when, zone = _ident(author)
    _, committed, _ = _ident(committer)
    return CommitInfo(
        sha=sha,
        tree=tree,
        parents=tuple(parents),
        committed=committed,
        author=name,
        date=_iso(when, zone),
        subject=subject(message.decode("utf-8", errors="replace")),
    )


def _ident(value: bytes) -> tuple[str, int, str]:
    """name, time and zone of an `author`/`committer` header."""
    text = value.decode("utf-8", errors="replace")
    close = text.rfind(">")
    opening = text.rfind("<", 0, close)
    if close < 0 or opening < 0:
        raise Undecided(f"unreadable identity {text!r}")
    when, _, zone = text[close + 1 :].strip().partition(" ")
    try:
        return text[:opening].rstrip(), int(when), zone
    except ValueError as exc:
        raise Undecided(f"unreadable date in {text!r}") from exc


def _iso(when: int, zone: str) -> str:
    if len(zone) != 5 or zone[0] not in "+-" or not zone[1:].isdigit():
        raise Undecided(f"unreadable time zone {zone!r}")
    offset = timedelta(hours=int(zone[1:3]), minutes=int(zone[3:5]))
    tz = timezone(-offset if zone[0] == "-" else offset)
    return datetime.fromtimestamp(when, tz).isoformat()


def subject(message: str) -> str:
    """git's %s: blank lines skipped, then the lines up to the next blank line,
    each without trailing whitespace, joined by single spaces."""
    lines = message.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    taken = []
    for line in lines:
        if not line.strip():
            break
        taken.append(line.rstrip())
    return " ".join(taken)


def tree_of(repo: Repo, commit: str) -> str:
    """The tree id of `commit` (its first header line)."""
    data = read(repo, commit, "commit")
    if not data.startswith(b"tree "):
        raise Undecided(f"{commit} has no tree line")
    return data[5:45].decode()


Entry = tuple[int, str]
"""A tree entry's mode and object id."""


RawEntries = dict[bytes, tuple[bytes, bytes]]
"""One tree as stored: sort key (the name, with "/" after a directory's, which is
how git orders a tree) -> (mode, binary id), all bytes: nothing is converted
for the entries a comparison skips."""

_ENTRY = re.compile(rb"([0-7]+) ([^\0]*)\0(.{20})", re.S)
_TREE = re.compile(rb"(?:[0-7]+ [^\0]*\0.{20})*", re.S)
_RAW_TREE_MODE = b"40000"
_TREES: OrderedDict[str, RawEntries] = OrderedDict()
_TREES_KEPT = 64
"""Trees parsed lately, by id (a tree never changes): the previous tip's trees
are this tip's "before" side, and a large directory is parsed once."""


def raw_entries(repo: Repo, tree: str) -> RawEntries:
    """One tree's entries as stored (do not change the dict)."""
    with _LOCK:
        kept = _TREES.get(tree)
        if kept is not None:
            _TREES.move_to_end(tree)
            return kept
    data = read(repo, tree, "tree")
    # Every byte must belong to an entry, or the parse would slip: ask git.
    if not _TREE.fullmatch(data):
        raise Undecided(f"tree {tree} does not parse")
    found = _ENTRY.findall(data)
    entries = {
        name + b"/" if mode == _RAW_TREE_MODE else name: (mode, sha) for mode, name, sha in found
    }
    with _LOCK:
        _TREES[tree] = entries
        while len(_TREES) > _TREES_KEPT:
            _TREES.popitem(last=False)
    return entries


def _name(key: bytes) -> str:
    try:
        return key.removesuffix(b"/").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Undecided(f"{key!r} is not UTF-8") from exc


def _entry(key: bytes, raw: tuple[bytes, bytes]) -> tuple[str, Entry]:
    """The name and (mode, hex id) of a raw entry."""
    return _name(key), (int(raw[0], 8), raw[1].hex())


def tree_entries(repo: Repo, tree: str) -> dict[str, Entry]:
    """Name -> (mode, id) of one tree's entries."""
    return dict(_entry(key, raw) for key, raw in raw_entries(repo, tree).items())


def entry_at(repo: Repo, tree: str, path: str) -> Entry | None:
    """The entry at `path` (slash-separated) in `tree`, None when there is none."""
    *dirs, name = path.split("/")
    for part in dirs:
        raw = raw_entries(repo, tree).get(part.encode() + b"/")
        if raw is None:
            return None
        tree = raw[1].hex()
    key = name.encode()
    entries = raw_entries(repo, tree)
    raw = entries.get(key) or entries.get(key + b"/")
    return None if raw is None else _entry(key, raw)[1]


@dataclass(frozen=True)
class Change:
    """A path whose entry differs between two trees (as `git diff --no-renames`
    lists it): a file, a symlink or a submodule, never a directory."""

    path: str
    old: Entry | None
    new: Entry | None


def changed_paths(repo: Repo, old: str, new: str, limit: int) -> list[Change]:
    """What differs between trees `old` and `new`, file by file, without a git
    process: subtrees with the same id are skipped, so the cost follows the size
    of the change, not of the repository. More than `limit` changes: Undecided."""
    found: list[Change] = []
    _diff(repo, old, new, "", found, limit)
    return found


def _diff(
    repo: Repo, old: str | None, new: str | None, prefix: str, found: list[Change], limit: int
) -> None:
    if old == new:
        return
    # Keyed as git orders a tree (a directory sorts as "name/"), so the changes
    # come in the order `git diff` lists them; a file and a directory of one
    # name are two different entries (one deleted, the other added).
    a = raw_entries(repo, old) if old else {}
    b = raw_entries(repo, new) if new else {}
    for key in sorted({key for key, _ in a.items() ^ b.items()}):
        left, right = a.get(key), b.get(key)
        path = prefix + _name(key)
        if key.endswith(b"/"):
            old_tree = left[1].hex() if left else None
            _diff(repo, old_tree, right[1].hex() if right else None, path + "/", found, limit)
        else:
            old_entry = _entry(key, left)[1] if left else None
            found.append(Change(path, old_entry, _entry(key, right)[1] if right else None))
        if len(found) > limit:
            raise Undecided(f"more than {limit} paths changed")


def is_ancestor(repo: Repo, ancestor: str, descendant: str, limit: int = 64) -> bool:
    """Whether `ancestor` is reachable from `descendant`, by walking parents from
    `descendant`; Undecided when `limit` commits were walked without finding it."""
    seen = {descendant}
    todo = [descendant]
    while todo:
        sha = todo.pop()
        if sha == ancestor:
            return True
        for parent in commit_info(repo, sha).parents:
            if parent not in seen:
                if len(seen) >= limit:
                    raise Undecided(f"{ancestor[:10]} not within {limit} commits")
                seen.add(parent)
                todo.append(parent)
    return False


_INDEX_SIGNATURE = b"DIRC"
_ENTRY_HEADER = 62
"""ctime, mtime, dev, ino, mode, uid, gid, size (4 bytes each), the object id
(20) and the flags (2), before an index entry's name."""
_STAGE = 0x3000
_EXTENDED = 0x4000
_NAME_LENGTH = 0x0FFF


def index_entries(index: Path, paths: list[str]) -> dict[str, Entry]:
    """The mode and object id `paths` have in the index file `index` (version 2
    or 3, as git writes it unless told otherwise), found by name rather than by
    reading every entry: an entry starts 8-byte aligned after the header, and
    its flags give its name's length. Undecided unless each path has exactly
    one entry, at stage 0, with no extended flag (intent to add, skip the
    worktree) set."""
    try:
        data = index.read_bytes()
    except OSError as exc:
        raise Undecided(f"cannot read {index}: {exc}") from exc
    if data[:4] != _INDEX_SIGNATURE or int.from_bytes(data[4:8], "big") not in (2, 3):
        raise Undecided(f"{index} is not an index of version 2 or 3")
    found: dict[str, Entry] = {}
    for path in paths:
        name = path.encode("utf-8")
        if not name or len(name) >= _NAME_LENGTH or b"\0" in name:
            raise Undecided(f"{path!r}: a name soda does not look up")
        hits: list[Entry] = []
        at = data.find(name + b"\0", 12)
        while at != -1:
            for header in (_ENTRY_HEADER, _ENTRY_HEADER + 2):
                start = at - header
                if start < 12 or (start - 12) % 8:
                    continue
                flags = int.from_bytes(data[start + 60 : start + 62], "big")
                if flags & _NAME_LENGTH != len(name) or bool(flags & _EXTENDED) != (header > 62):
                    continue
                if flags & _STAGE or (header > 62 and data[start + 62 : start + 64] != b"\0\0"):
                    raise Undecided(f"{path} is conflicted or flagged in the index")
                mode = int.from_bytes(data[start + 24 : start + 28], "big")
                hits.append((mode, data[start + 40 : start + 60].hex()))
            at = data.find(name + b"\0", at + 1)
        if len(hits) != 1:
            raise Undecided(f"{path} has {len(hits)} entries in the index")
        found[path] = hits[0]
    return found
