"""Long-lived git processes, and the git settings soda reads once.

A git process costs a fork and exec of git and its start (reading config, the
index, the refs): 2-4 ms, most of an iteration's git time. Some of git's
commands read requests on standard input and answer each in turn, so one
process started once per repository answers every iteration's questions of
that kind, each at the cost of a pipe round trip:

- `RefTransactions`: `git update-ref --stdin`, one ref transaction at a time
  (`start` ... `commit`). It is git's own ref code that runs (lock files,
  packed refs, reflogs, the configured fsync), so a transaction is exactly as
  safe as `git update-ref` run alone; a transaction git refuses (a
  compare-and-swap that lost) ends the process with git's message, and the
  next transaction starts a new one. A transaction is written in one `write`
  (smaller than a pipe's atomic size), so a kill of soda delivers all of it,
  `commit` included, or nothing; an explicit transaction that loses its input
  before `commit` is aborted by git.
- `TreeDiffs`: `git diff-tree --stdin`, a diff between two trees per request.
  A line that is not an object id is echoed back (and flushed), which marks the
  end of each answer.

Each process runs with soda's options (`SODA_IDENTITY`: hooks off, and so on),
without garbage collection, in a process group of its own (a Ctrl-C at the
terminal stops soda, not its helpers midway), and ends when its standard input
closes: when soda exits, is killed, or the `Repo` it serves is collected.
Anything unexpected (the process died, an answer that does not parse) raises
`GitError`; callers that can ask git the ordinary way do.

`settings(repo)` is the configuration git itself resolves (`git var -l`: every
config file, `-c` options, the identities), read once and again only when a
config file or an environment variable that git reads changed.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import tempfile
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from git import Repo

from soda.errors import GitError
from soda.repo.git import SODA_IDENTITY

NO_AUTO_GC: tuple[str, ...] = ("-c", "gc.auto=0", "-c", "maintenance.auto=false")
"""See soda.repo.refs.NO_AUTO_GC (the same options)."""


class _Helper:
    """One long-lived git process (started on first use, again after it died)."""

    def __init__(self, cwd: str, args: tuple[str, ...]) -> None:
        self.cwd = cwd
        self.argv = ["git", *SODA_IDENTITY, *NO_AUTO_GC, *args]
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.errors: IO[bytes] | None = None
        self.started = 0
        """How many processes this helper started (for tests and benches)."""

    def process(self) -> subprocess.Popen[bytes]:
        """The running process (call with `lock` held)."""
        if self.proc is not None and self.proc.poll() is None:
            return self.proc
        self.stop()
        # git's messages go to a file, not a pipe nobody reads while it runs:
        # a chatty warning can never fill a pipe and stall the process.
        self.errors = tempfile.TemporaryFile()  # noqa: SIM115 (lives with the process)
        env = {**os.environ, "LC_ALL": "C", "LANGUAGE": "C", "GIT_TERMINAL_PROMPT": "0"}
        try:
            self.proc = subprocess.Popen(
                self.argv,
                cwd=self.cwd,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.errors,
                start_new_session=True,
            )
        except OSError as exc:
            raise GitError(f"cannot start {' '.join(self.argv[-3:])}: {exc}") from exc
        self.started += 1
        return self.proc

    def failed(self, what: str) -> GitError:
        """The process's end, with git's message (call with `lock` held)."""
        message = ""
        proc, errors = self.proc, self.errors
        if proc is not None:
            with contextlib.suppress(OSError, ValueError):
                if proc.stdin is not None:
                    proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
        if errors is not None:
            with contextlib.suppress(OSError, ValueError):
                errors.seek(0)
                message = errors.read().decode(errors="replace").strip()
        self.stop()
        return GitError(f"{what} failed: {message or 'git ended without an answer'}")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        errors, self.errors = self.errors, None
        if proc is not None:
            _end(proc)
        if errors is not None:
            with contextlib.suppress(OSError):
                errors.close()


def _end(proc: subprocess.Popen[bytes]) -> None:
    """Close a helper's input (it ends there) and reap it."""
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            with contextlib.suppress(OSError, ValueError):
                stream.close()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)


class _Helpers:
    """The helpers of one repository (see `helpers_of`)."""

    def __init__(self, repo: Repo) -> None:
        cwd = repo.working_tree_dir or repo.git_dir
        self.refs = _Helper(str(cwd), ("update-ref", "--stdin"))
        self.diffs: dict[tuple[str, ...], _Helper] = {}
        self.attrs = _Helper(str(cwd), ("check-attr", "--stdin", "-z", "diff"))
        self.attrs_generation = ""
        self.cwd = str(cwd)
        self.lock = threading.Lock()

    def diff_helper(self, options: tuple[str, ...]) -> _Helper:
        with self.lock:
            helper = self.diffs.get(options)
            if helper is None:
                helper = _Helper(self.cwd, ("diff-tree", "--stdin", "-r", *options))
                self.diffs[options] = helper
            return helper

    def all(self) -> list[_Helper]:
        with self.lock:
            return [self.refs, self.attrs, *self.diffs.values()]


_ATTRIBUTE = "_soda_helpers"
_MAKING = threading.Lock()


def helpers_of(repo: Repo) -> _Helpers:
    """The helpers serving `repo` (one set per `Repo` object; they end when it is
    collected, or at `close`)."""
    found: _Helpers | None = getattr(repo, _ATTRIBUTE, None)
    if found is not None:
        return found
    with _MAKING:
        found = getattr(repo, _ATTRIBUTE, None)
        if found is None:
            found = _Helpers(repo)
            setattr(repo, _ATTRIBUTE, found)
            weakref.finalize(repo, _close_all, found)
    return found


def _close_all(helpers: _Helpers) -> None:
    for helper in helpers.all():
        with helper.lock:
            helper.stop()


def close(repo: Repo) -> None:
    """End `repo`'s helper processes now (they start again on the next use)."""
    found: _Helpers | None = getattr(repo, _ATTRIBUTE, None)
    if found is not None:
        _close_all(found)


# --- ref transactions -----------------------------------------------------------------


def transaction(repo: Repo, lines: list[str]) -> None:
    """Apply `lines` (update-ref --stdin commands: `update REF NEW [OLD]`,
    `create REF NEW`, `delete REF [OLD]`) in one ref transaction: all of them or
    none. GitError with git's message when git refuses it."""
    for line in lines:
        if "\n" in line or "\0" in line:
            raise GitError(f"not a ref command: {line!r}")
    payload = ("start\n" + "".join(f"{line}\n" for line in lines) + "commit\n").encode()
    helper = helpers_of(repo).refs
    with helper.lock:
        proc = helper.process()
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(payload)
            proc.stdin.flush()
            answer = proc.stdout.readline() + proc.stdout.readline()
        except OSError:
            answer = b""
        if answer != b"start: ok\ncommit: ok\n":
            raise helper.failed("git update-ref")


# --- tree diffs -----------------------------------------------------------------------


def tree_diff(repo: Repo, options: tuple[str, ...], old: str, new: str) -> str:
    """`git diff-tree -r OPTIONS OLD NEW` (two tree ids), from the long-lived
    process for those options."""
    if not (_is_hex(old) and _is_hex(new)):
        raise GitError(f"tree_diff wants two object ids, not {old!r} {new!r}")
    helper = helpers_of(repo).diff_helper(options)
    end = f"soda-end-{secrets.token_hex(8)}\n".encode()
    with helper.lock:
        proc = helper.process()
        assert proc.stdin is not None and proc.stdout is not None
        lines: list[bytes] = []
        try:
            proc.stdin.write(f"{old} {new}\n".encode() + end)
            proc.stdin.flush()
            while True:
                line = proc.stdout.readline()
                if not line:
                    raise helper.failed("git diff-tree")
                if line == end:
                    break
                lines.append(line)
        except OSError:
            raise helper.failed("git diff-tree") from None
    # Each answer starts with the pair of trees it compares.
    if lines and lines[0] == f"{old} {new}\n".encode():
        lines.pop(0)
    return b"".join(lines).decode("utf-8", errors="surrogateescape")


def _is_hex(name: str) -> bool:
    return len(name) in (40, 64) and all(c in "0123456789abcdef" for c in name)


# --- attributes -------------------------------------------------------------------------


def diff_attribute(repo: Repo, path: str, generation: str) -> str:
    """The `diff` attribute of `path` as git's diff would find it (`git check-attr
    diff`: the checkout's attribute files, the index where the checkout has
    none, info/attributes, the global file): `unspecified`, `set`, `unset`, or a
    driver's name. git reads attribute files once per process, so the process is
    started again when `generation` (what the caller knows of the attribute
    files, e.g. soda.repo.digest.settings_stamp) changes."""
    if "\0" in path:
        raise GitError(f"not a path: {path!r}")
    found = helpers_of(repo)
    helper = found.attrs
    with helper.lock:
        if found.attrs_generation != generation:
            helper.stop()
            found.attrs_generation = generation
        proc = helper.process()
        assert proc.stdin is not None and proc.stdout is not None
        answer = b""
        try:
            proc.stdin.write(os.fsencode(path) + b"\0")
            proc.stdin.flush()
            while answer.count(b"\0") < 3:
                chunk = proc.stdout.read1(4096)  # type: ignore[attr-defined]
                if not chunk:
                    raise helper.failed("git check-attr")
                answer += chunk
        except OSError:
            raise helper.failed("git check-attr") from None
    fields = answer.split(b"\0")
    if len(fields) != 4 or fields[0] != os.fsencode(path) or fields[1] != b"diff":
        with helper.lock:
            raise helper.failed("git check-attr (an answer out of step)")
    return fields[2].decode("utf-8", errors="surrogateescape")


# --- git's settings ---------------------------------------------------------------------

_ENVIRONMENT = (
    "HOME", "XDG_CONFIG_HOME", "GIT_CONFIG", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL",
    "GIT_COMMITTER_DATE", "EMAIL", "GIT_DIR", "GIT_OBJECT_DIRECTORY", "TZ",
)  # fmt: skip
"""Environment variables that change what git resolves (or where it writes)."""


class Settings:
    """What `git var -l` says: config keys (lower-case section and name, as git
    prints them; the last value of a key wins) and the identities."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)

    def flag(self, key: str, default: bool = False) -> bool:
        value = self.values.get(key)
        if value is None:
            return default
        return value.strip().lower() in ("true", "yes", "on", "1", "")


_SETTINGS: dict[str, tuple[tuple[Any, ...], Settings]] = {}
_SETTINGS_LOCK = threading.Lock()


def settings(repo: Repo, run: Callable[[list[str]], str] | None = None) -> Settings:
    """git's resolved configuration for `repo`, from one `git var -l` (with soda's
    options), kept while the config files and the environment stay the same.
    (A file that a config file includes is not watched.)"""
    key = _stamp(repo)
    common = str(repo.common_dir)
    with _SETTINGS_LOCK:
        kept = _SETTINGS.get(common)
        if kept is not None and kept[0] == key:
            return kept[1]
    argv = ["git", *SODA_IDENTITY, "var", "-l"]
    try:
        text = run(argv) if run is not None else str(repo.git.execute(argv))
    except Exception as exc:
        raise GitError(f"git var -l failed: {exc}") from exc
    values: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep:
            values[name] = value
    found = Settings(values)
    with _SETTINGS_LOCK:
        _SETTINGS[common] = (key, found)
    return found


_CONTENTS: dict[Path, tuple[tuple[int, int, int], bytes]] = {}


def _content(path: Path) -> bytes | None:
    """A file's content (None when it is missing), read again only when its
    stat changed: git rewrites its config unchanged (`branch -D` does), which
    must not cost a `git var -l` each time."""
    try:
        st = path.stat()
    except OSError:
        return None
    key = (st.st_mtime_ns, st.st_size, st.st_ino)
    kept = _CONTENTS.get(path)
    if kept is not None and kept[0] == key:
        return kept[1]
    try:
        data = path.read_bytes()
    except OSError:
        return None
    _CONTENTS[path] = (key, data)
    return data


def _stamp(repo: Repo) -> tuple[Any, ...]:
    home = Path(os.environ.get("HOME") or Path.home())
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config") / "git"
    files = [
        Path(repo.common_dir) / "config",
        Path(repo.git_dir) / "config.worktree",
        home / ".gitconfig",
        xdg / "config",
        Path("/etc/gitconfig"),
    ]
    for name in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG"):
        if os.environ.get(name):
            files.append(Path(os.environ[name]))
    stats = [_content(path) for path in files]
    env = [os.environ.get(name) for name in _ENVIRONMENT]
    # GIT_CONFIG_COUNT's pairs, by name: walking all of os.environ costs more
    # than the rest of this together.
    count = os.environ.get("GIT_CONFIG_COUNT", "")
    for n in range(int(count) if count.isdigit() else 0):
        env += [os.environ.get(f"GIT_CONFIG_KEY_{n}"), os.environ.get(f"GIT_CONFIG_VALUE_{n}")]
    return (tuple(stats), tuple(env))
