"""Writing commits and trees without a git process.

Each merge soda lands is a commit object whose tree and parents soda already
knows (soda.repo.workspace.prepare_merge); `git commit-tree` would cost a
process for what is a few hundred bytes. `commit_tree` writes the same object
`git commit-tree TREE -p ... -m MESSAGE` writes, byte for byte:

    tree TREE
    parent P (each)
    author IDENT TIME ZONE
    committer IDENT TIME ZONE

    MESSAGE (with a final newline added when it has none)

`commit` is the same object with the message as `git commit -m` keeps it
(`stripspace`), and `tree_with` a tree with some files added or replaced, as
git writes trees: a task's commit (soda.repo.workspace.Workspace.commit_all)
is `git add` of the files it wrote, then these two, instead of `git commit`,
which refreshes every entry of the index and rewrites its trees (a cost that
grew with the repository).

- the identities are git's own (`git var -l`, with soda's `-c user.name/email`:
  config, `author.*`/`committer.*` keys and GIT_AUTHOR_*/GIT_COMMITTER_*
  variables resolved by git, see soda.repo.helpers.settings); the time is now,
  in the local time zone, as git takes it;
- an object is stored as git stores a loose object: compressed into a
  `tmp_obj_*` file beside its final place (git's `prune` removes such files
  that a crash left), fsynced when git's `core.fsync` settings ask for loose
  objects, read-only, then hard-linked to its name (an object already there is
  kept: the same name is the same content) and the temporary file removed.
  Until a ref points at it, an object is unreachable and changes nothing.

When something would make git write another object than this (a fixed date in
GIT_*_DATE, another commit encoding or message clean-up, a SHA-256 repository,
a shared repository's permissions, an object directory elsewhere, a message git
could not pass in argv, a file where the tree has a directory), these return
None and the caller runs git.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import time
import zlib
from pathlib import Path

from git import Repo

from soda.errors import GitError
from soda.repo import helpers, objects

_FIXED_DATES = ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE")
_FSYNC_LOOSE = {"loose-object", "objects", "committed", "added", "all"}


def commit_tree(repo: Repo, tree: str, parents: list[str], message: str) -> str | None:
    """The id of a new commit of `tree` with `parents` and `message`, written to
    the object database as `git commit-tree` would; None when only git can be
    sure to write the same object (see the module docstring)."""
    if "\0" in message:
        return None  # git takes the message in argv, which cannot hold one
    try:
        text = message.encode("utf-8")
    except UnicodeEncodeError:
        return None
    if not text.endswith(b"\n"):
        text += b"\n"
    return _commit(repo, tree, parents, text)


def commit(repo: Repo, tree: str, parents: list[str], message: str) -> str | None:
    """`commit_tree` with the message as `git commit -m MESSAGE` keeps it (its
    `whitespace` clean-up, `stripspace`); None when git must write it (also
    when the config names another clean-up, or nothing is left of the message)."""
    try:
        found = helpers.settings(repo)
    except GitError:
        return None
    if found.get("commit.cleanup") is not None or "\0" in message:
        return None
    try:
        text = stripspace(message.encode("utf-8"))
    except UnicodeEncodeError:
        return None
    if not text:
        return None  # git refuses an empty message
    return _commit(repo, tree, parents, text)


_GIT_SPACE = b" \t\n\r"
"""What git's own isspace() calls space (not \\v, \\f, nor any non-ASCII space)."""


def stripspace(text: bytes) -> bytes:
    """git's strbuf_stripspace without comment lines: trailing whitespace off
    every line, runs of empty lines made one, none at the start or the end, and
    a final newline."""
    out: list[bytes] = []
    empties = 0
    for line in text.split(b"\n"):
        line = line.rstrip(_GIT_SPACE)
        if not line:
            empties += 1
            continue
        if empties and out:
            out.append(b"")
        empties = 0
        out.append(line)
    return b"\n".join(out) + b"\n" if out else b""


def _commit(repo: Repo, tree: str, parents: list[str], text: bytes) -> str | None:
    if any(os.environ.get(name) for name in (*_FIXED_DATES, "GIT_OBJECT_DIRECTORY")):
        return None
    found = _writable(repo)
    if found is None:
        return None
    encoding = (found.get("i18n.commitencoding") or "utf-8").lower()
    if encoding not in ("utf-8", "utf8"):
        return None
    author = _ident(found.get("GIT_AUTHOR_IDENT"))
    committer = _ident(found.get("GIT_COMMITTER_IDENT"))
    if author is None or committer is None:
        return None
    stamp = _datestamp(time.time())
    lines = [f"tree {tree}", *(f"parent {p}" for p in parents)]
    lines += [f"author {author} {stamp}", f"committer {committer} {stamp}"]
    body = ("\n".join(lines) + "\n\n").encode("utf-8") + text
    return write_object(repo, "commit", body, fsync=_fsync_loose(found))


def _writable(repo: Repo) -> helpers.Settings | None:
    """git's settings when soda can write objects the way git would: a SHA-1
    repository without shared-repository permissions; else None."""
    try:
        found = helpers.settings(repo)
    except GitError:
        return None
    if (found.get("extensions.objectformat") or "sha1").lower() != "sha1":
        return None
    shared = (found.get("core.sharedrepository") or "").lower()
    if shared not in ("", "false", "umask", "0", "no", "off"):
        return None
    return found


def tree_with(repo: Repo, tree: str, files: dict[str, tuple[int, str]]) -> str | None:
    """The tree `tree` with `files` (path -> (mode, blob id)) added or replaced,
    written as git writes trees (entries in git's order; every tree on the way
    to a changed file written anew, the others kept); None when soda cannot
    be sure to write what git would (a file where the tree has a directory, or
    the other way round, a tree it cannot read, a repository git must write)."""
    found = _writable(repo)
    if found is None or os.environ.get("GIT_OBJECT_DIRECTORY"):
        return None
    try:
        return _tree_with(repo, tree, files, _fsync_loose(found))
    except objects.Undecided:
        return None


def _tree_with(repo: Repo, tree: str | None, files: dict[str, tuple[int, str]], fsync: bool) -> str:
    entries = dict(objects.raw_entries(repo, tree)) if tree else {}
    below: dict[bytes, dict[str, tuple[int, str]]] = {}
    for path, (mode, blob) in files.items():
        first, slash, rest = path.partition("/")
        name = first.encode("utf-8")
        if not name or name in (b".", b"..", b".git") or (not rest and slash):
            raise objects.Undecided(f"not a path git would add: {path!r}")
        if slash:
            if name in entries:
                raise objects.Undecided(f"{first} is a file in the tree")
            below.setdefault(name + b"/", {})[rest] = (mode, blob)
        else:
            if name + b"/" in entries or mode not in (0o100644, 0o100755):
                raise objects.Undecided(f"{path} is not a plain file over a file")
            entries[name] = (b"%o" % mode, bytes.fromhex(blob))
    for key, inner in below.items():
        old = entries.get(key)
        sub = _tree_with(repo, old[1].hex() if old else None, inner, fsync)
        entries[key] = (b"40000", bytes.fromhex(sub))
    body = b"".join(
        mode + b" " + key.removesuffix(b"/") + b"\0" + sha
        for key, (mode, sha) in sorted(entries.items())
    )
    return write_object(repo, "tree", body, fsync=fsync)


def _ident(value: str | None) -> str | None:
    """`Name <email>` from git's `Name <email> TIME ZONE`."""
    if not value:
        return None
    parts = value.rsplit(" ", 2)
    if len(parts) != 3:
        return None
    head = parts[0]
    if "<" not in head or not head.endswith(">") or "\n" in head:
        return None
    return head


def _datestamp(now: float) -> str:
    """`TIME ZONE` as git writes the current time: seconds, and the local time
    zone's offset as +HHMM."""
    seconds = int(now)
    minutes = time.localtime(seconds).tm_gmtoff // 60
    sign = "-" if minutes < 0 else "+"
    minutes = abs(minutes)
    return f"{seconds} {sign}{minutes // 60:02d}{minutes % 60:02d}"


def _fsync_loose(found: helpers.Settings) -> bool:
    """Whether git would fsync a loose object it writes (`core.fsync`, or the
    older `core.fsyncObjectFiles`)."""
    if found.flag("core.fsyncobjectfiles"):
        return True
    wanted = False
    for part in (found.get("core.fsync") or "").split(","):
        part = part.strip().lower()
        if not part:
            continue
        if part == "none":
            wanted = False
        elif part.startswith("-"):
            if part[1:] in _FSYNC_LOOSE:
                wanted = False
        elif part in _FSYNC_LOOSE:
            wanted = True
    return wanted


def write_object(repo: Repo, kind: str, body: bytes, fsync: bool = False) -> str:
    """Store one object as a loose object (see the module docstring); its id."""
    data = f"{kind} {len(body)}\0".encode() + body
    sha = hashlib.sha1(data).hexdigest()
    final = Path(repo.common_dir) / "objects" / sha[:2] / sha[2:]
    if final.exists():
        return sha
    final.parent.mkdir(exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="tmp_obj_", dir=final.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(zlib.compress(data, 1))
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.chmod(tmp, 0o444)
        try:
            os.link(tmp, final)
        except FileExistsError:
            pass  # written meanwhile: the same name is the same content
        except OSError:
            os.replace(tmp, final)  # a file system without hard links
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return sha
