"""What the milestone holds since its base, kept up to date in O(change), not O(history).

SENSE tells ORIENT the newest commits since the base, how many there are, and
the diffstat of base..tip. Asking git for them (`git log base..tip`,
`git rev-list --count`, `git diff --numstat base..tip`) walks the whole
milestone every iteration, so an iteration got slower with every merge. The
digest is the previous answer, kept in the store (`DigestStore`), plus what
changed since:

- commits: the new ones are those reachable from the tip but not from the
  previous tip, walked in the object database (no git process) until the
  walk meets commits the store knows; the count grows by theirs, the newest
  ten are merged into the stored ten.
- files: only paths whose entry differs between the previous tip's tree and the
  tip's (a tree comparison that skips equal subtrees) can have another row in
  `git diff --numstat base tip`; git is asked for those paths alone.

Order of the commits: newest first by committer time, then by generation (a
descendant before its ancestor: commits made within one second stay in the
order they were made on each line of history), then by id. A total order of the
commits' own data, so the incremental answer and a full rebuild agree.

When in doubt the digest is rebuilt from git: no stored digest, another
base, a tip that does not descend from the stored one (a person reset or
rewrote the branch), git settings that changed (config or attribute files:
they decide renames, binary files and quoting), a walk that leaves the
milestone (a merge of history older than the base), or a change where git's
rename detection could pair files differently (a milestone that both added
and deleted files, touched there again). A crash mid-update leaves the stored
digest of an older tip (it is written in one transaction), which the next
SENSE advances like any other.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from git import Repo

from soda.errors import GitError
from soda.repo.numstat import PAIRED, Row, numstat, parse_numstat
from soda.repo.objects import (
    Undecided,
    changed_paths,
    commit_info,
    tree_of,
)
from soda.repo.refs import _git

MAX_WALK = 1000
"""New commits one update walks before it rebuilds instead."""
MAX_DELTA = 500
"""Changed paths one update asks git about before it rebuilds instead."""


class DigestStore(Protocol):
    """Where a digest lives between iterations (soda.store.digests)."""

    def load(self) -> dict[str, Any] | None: ...

    def gens(self, shas: Iterable[str]) -> dict[str, int]: ...

    def rows_touching(self, paths: list[str]) -> list[Row]: ...

    def top(self, limit: int) -> list[Row]: ...

    def replace(self, state: dict[str, Any], gens: dict[str, int], rows: list[Row]) -> None: ...

    def advance(
        self, state: dict[str, Any], gens: dict[str, int], drop: list[str], rows: list[Row]
    ) -> None: ...


@dataclass
class Digest:
    """The milestone since its base at one tip."""

    head: str
    commits_total: int
    recent: list[dict[str, Any]]
    """The newest commits (sha, committed, gen, author, date, subject), newest first."""
    files: int = 0
    added: int = 0
    removed: int = 0
    adds: int = 0
    deletes: int = 0
    pairs: int = 0
    settings: str = ""
    copies: bool = False
    """`diff.renames` asks for copies: the diff is rebuilt on every change."""
    rebuilt: bool = field(default=False, compare=False)
    """This answer came from a full rebuild (for tests and benches)."""

    def state(self) -> dict[str, Any]:
        return {
            key: getattr(self, key)
            for key in (
                "head", "commits_total", "recent", "files", "added", "removed",
                "adds", "deletes", "pairs", "settings", "copies",
            )
        }  # fmt: skip


def refresh(repo: Repo, store: DigestStore, base: str, head: str, keep: int) -> Digest:
    """The digest of base..head, advanced from the stored one or rebuilt."""
    settings = settings_stamp(repo)
    stored = store.load()
    if stored is not None and stored.get("settings") == settings:
        previous = Digest(**stored)
        if previous.head == head:
            return previous
        try:
            return _advance(repo, store, base, previous, head, keep)
        except (Undecided, GitError):
            pass
    return rebuild(repo, store, base, head, keep, settings)


def settings_stamp(repo: Repo) -> str:
    """What decides how git shows the diff besides the trees: the config files
    (renames, quoting) and attribute files (binary, diff drivers) soda can find,
    by content, with the environment that names them. (Attribute files below
    the checkout's top directory are not looked at.)"""
    home = Path.home()
    git_dir = Path(repo.common_dir)
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config") / "git"
    files = [
        git_dir / "config",
        git_dir / "info" / "attributes",
        home / ".gitconfig",
        xdg / "config",
        xdg / "attributes",
        Path("/etc/gitconfig"),
    ]
    if repo.working_tree_dir:
        files.append(Path(repo.working_tree_dir) / ".gitattributes")
    parts = [
        os.environ.get(name, "")
        for name in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM")
    ]
    parts.append(os.environ.get("GIT_CONFIG_PARAMETERS", ""))
    digest = hashlib.sha256("\0".join(parts).encode())
    for path in files:  # by content: git rewrites its config unchanged (`branch -D`)
        try:
            digest.update(b"\0" + bytes(path) + b"\0" + path.read_bytes())
        except OSError:
            digest.update(b"\0" + bytes(path) + b"\0-")
    return digest.hexdigest()[:16]


# --- a full rebuild ---------------------------------------------------------------


def rebuild(
    repo: Repo, store: DigestStore, base: str, head: str, keep: int, settings: str = ""
) -> Digest:
    """The digest from git alone: every commit of base..head, and the whole diff."""
    log = _git(repo, "log", "--topo-order", "--format=%H %ct %P", f"{base}..{head}")
    parsed = [line.split() for line in log.splitlines() if line]
    gens: dict[str, int] = {}
    for sha, _, *parents in reversed(parsed):  # parents before children
        gens[sha] = 1 + max((gens.get(p, 0) for p in parents), default=0)
    order = sorted(parsed, key=lambda c: (-int(c[1]), -gens[c[0]], c[0]))
    recent = [_recent(repo, sha, gens[sha]) for sha, *_ in order[:keep]]
    rows = parse_numstat(_git(repo, "diff", "--raw", "--numstat", base, head))
    digest = Digest(head, len(parsed), recent, settings=settings or settings_stamp(repo))
    digest.copies = _copies(repo)
    _count(digest, [], rows)
    store.replace(digest.state(), gens, rows)
    digest.rebuilt = True
    return digest


def _copies(repo: Repo) -> bool:
    """Whether `diff.renames` asks for copy detection: a copy may pair with any
    modified file, so the diff is never updated path by path then."""
    try:
        value = str(repo.config_reader().get_value("diff", "renames", "true")).lower()
    except Exception:  # unreadable config: git would refuse it anyway
        return True
    return value.startswith("cop")


def _recent(repo: Repo, sha: str, gen: int) -> dict[str, Any]:
    info = commit_info(repo, sha)
    return {
        "sha": sha,
        "committed": info.committed,
        "gen": gen,
        "author": info.author,
        "date": info.date,
        "subject": info.subject,
    }


def _order(commit: dict[str, Any]) -> tuple[int, int, str]:
    return (-commit["committed"], -commit["gen"], commit["sha"])


# --- advancing a stored digest ----------------------------------------------------


def _advance(
    repo: Repo, store: DigestStore, base: str, previous: Digest, head: str, keep: int
) -> Digest:
    new, gens = _new_commits(repo, store, base, previous.head, head)
    recent = sorted(previous.recent + [_recent(repo, sha, gens[sha]) for sha in new], key=_order)[
        :keep
    ]
    digest = Digest(
        head,
        previous.commits_total + len(new),
        recent,
        files=previous.files,
        added=previous.added,
        removed=previous.removed,
        adds=previous.adds,
        deletes=previous.deletes,
        pairs=previous.pairs,
        settings=previous.settings,
        copies=previous.copies,
    )
    changes = changed_paths(repo, tree_of(repo, previous.head), tree_of(repo, head), MAX_DELTA)
    paths = [change.path for change in changes]
    old = store.rows_touching(paths) if paths else []
    rows = numstat(repo, base, head, changes, previous.settings) if paths else []
    _count(digest, old, rows)
    # git pairs added and deleted files (renames) across the whole diff: a
    # change to a pair, or to an added or deleted file while the diff holds both
    # kinds, may pair them otherwise; so may any change under copy detection.
    touched = {row[5] for row in old} | {row[5] for row in rows}
    pairing_possible = digest.adds + digest.pairs > 0 and digest.deletes + digest.pairs > 0
    if paths and (
        digest.copies or touched & set(PAIRED) or (pairing_possible and touched & {"A", "D"})
    ):
        raise Undecided("git's rename detection may pair these files otherwise")
    store.advance(digest.state(), {sha: gens[sha] for sha in new}, [r[0] for r in old], rows)
    return digest


def _new_commits(
    repo: Repo, store: DigestStore, base: str, previous: str, head: str
) -> tuple[list[str], dict[str, int]]:
    """The commits reachable from `head` but not from `previous` (nor the base),
    and the generation of each (and of their parents), walking parents until
    the walk meets the base or commits the store knows. Undecided when
    `previous` is not among them (the branch was reset or rewritten), or the walk
    leaves the milestone (a root commit, or more than MAX_WALK commits)."""
    parents: dict[str, tuple[str, ...]] = {}
    boundary: set[str] = set()
    todo = [head]
    while todo:
        sha = todo.pop()
        if sha in parents or sha in boundary:
            continue
        if sha in (base, previous) or store.gens([sha]):
            boundary.add(sha)
            continue
        info = commit_info(repo, sha)
        if not info.parents:
            raise Undecided(f"{sha[:10]} is a root commit: the walk left the milestone")
        parents[sha] = info.parents
        if len(parents) > MAX_WALK:
            raise Undecided(f"more than {MAX_WALK} new commits")
        todo.extend(info.parents)
    if previous not in boundary and previous != head:
        raise Undecided(f"{head[:10]} does not descend from {previous[:10]}")
    gens = store.gens(boundary - {base})
    gens[base] = 0
    order: list[str] = []
    seen: set[str] = set()
    for start in parents:  # parents before children
        stack = [(start, False)]
        while stack:
            sha, done = stack.pop()
            if done:
                order.append(sha)
            elif sha not in seen and sha in parents:
                seen.add(sha)
                stack.append((sha, True))
                stack.extend((p, False) for p in parents[sha])
    for sha in order:
        gens[sha] = 1 + max(gens.get(p, 0) for p in parents[sha])
    return order, gens


def _count(digest: Digest, old: list[Row], new: list[Row]) -> None:
    """Move the digest's totals from rows `old` to rows `new`."""
    for rows, sign in ((old, -1), (new, 1)):
        for _, _, added, removed, _, status, _ in rows:
            digest.files += sign
            digest.added += sign * added
            digest.removed += sign * removed
            digest.adds += sign * (status == "A")
            digest.deletes += sign * (status == "D")
            digest.pairs += sign * (status in PAIRED)


# --- reading git's diff -----------------------------------------------------------


def diffstat(digest: Digest, top: list[Row], max_files: int) -> tuple[list[str], str]:
    """The files most changed first and a `--stat`-like summary, as
    soda.gate.evidence.diffstat makes them from a whole numstat."""
    if not digest.files:
        return [], ""
    lines = [f"{digest.files} files changed, +{digest.added} -{digest.removed}"]
    lines += [
        f"{shown} | {'binary' if binary else f'+{added} -{removed}'}"
        for _, shown, added, removed, binary, _, _ in top[:max_files]
    ]
    if digest.files > max_files:
        lines.append(f"... {digest.files - max_files} more files")
    return [row[1] for row in top], "\n".join(lines)
