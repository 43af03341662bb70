"""Writing a commit object without a git process.

Each merge soda lands is a commit object whose tree and parents soda already
knows (soda.repo.workspace.prepare_merge); `git commit-tree` would cost a
process for what is a few hundred bytes. `commit_tree` writes the same object
`git commit-tree TREE -p ... -m MESSAGE` writes, byte for byte:

    tree TREE
    parent P (each)
    author IDENT TIME ZONE
    committer IDENT TIME ZONE

    MESSAGE (with a final newline added when it has none)

- the identities are git's own (`git var -l`, with soda's `-c user.name/email`:
  config, `author.*`/`committer.*` keys and GIT_AUTHOR_*/GIT_COMMITTER_*
  variables resolved by git, see soda.repo.helpers.settings); the time is now,
  in the local time zone, as git takes it;
- the object is stored as git stores a loose object: compressed into a
  `tmp_obj_*` file beside its final place (git's `prune` removes such files
  that a crash left), fsynced when git's `core.fsync` settings ask for loose
  objects, read-only, then hard-linked to its name (an object already there is
  kept: the same name is the same content) and the temporary file removed.
  Until the ref points at it, the object is unreachable and changes nothing.

When something would make git write another object than this (a fixed date in
GIT_*_DATE, another commit encoding, a SHA-256 repository, a shared repository's
permissions, an object directory elsewhere, a message git could not pass in
argv), `commit_tree` returns None and the caller runs `git commit-tree`.
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
from soda.repo import helpers

_FIXED_DATES = ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE")
_FSYNC_LOOSE = {"loose-object", "objects", "committed", "added", "all"}


def commit_tree(repo: Repo, tree: str, parents: list[str], message: str) -> str | None:
    """The id of a new commit of `tree` with `parents` and `message`, written to
    the object database as `git commit-tree` would; None when only git can be
    sure to write the same object (see the module docstring)."""
    if any(os.environ.get(name) for name in (*_FIXED_DATES, "GIT_OBJECT_DIRECTORY")):
        return None
    if "\0" in message:
        return None  # git takes the message in argv, which cannot hold one
    try:
        text = message.encode("utf-8")
    except UnicodeEncodeError:
        return None
    try:
        found = helpers.settings(repo)
    except GitError:
        return None
    encoding = (found.get("i18n.commitencoding") or "utf-8").lower()
    if encoding not in ("utf-8", "utf8"):
        return None
    if (found.get("extensions.objectformat") or "sha1").lower() != "sha1":
        return None
    shared = (found.get("core.sharedrepository") or "").lower()
    if shared not in ("", "false", "umask", "0", "no", "off"):
        return None
    author = _ident(found.get("GIT_AUTHOR_IDENT"))
    committer = _ident(found.get("GIT_COMMITTER_IDENT"))
    if author is None or committer is None:
        return None
    stamp = _datestamp(time.time())
    lines = [f"tree {tree}", *(f"parent {p}" for p in parents)]
    lines += [f"author {author} {stamp}", f"committer {committer} {stamp}"]
    if not text.endswith(b"\n"):
        text += b"\n"
    body = ("\n".join(lines) + "\n\n").encode("utf-8") + text
    return write_object(repo, "commit", body, fsync=_fsync_loose(found))


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
