"""The one place soda runs subprocesses: test commands, agents' shell commands, git tools.

`run` starts the child in its own session so that a timeout can kill everything it
spawned, feeds it /dev/null as stdin, merges stdout and stderr, keeps memory
bounded however much the child prints (head and tail survive, the middle is
counted and cut), and reports a non-zero exit as data, never as an exception.
`scrubbed_env` is the environment a child gets by default: ours minus anything
that looks like a credential, so an agent's `env` or `printenv` cannot leak keys.

Every child's group is registered while it runs (`live_commands`): a stop can say
what it waits for, `interrupt_live` kills them at a first stop signal (their `run`
raises Interrupted, nothing new starts), `kill_live` kills all at once (a second
signal), an exception in the waiting thread (Ctrl-C) kills the group before it
propagates, and an observer (the session's activity file) hears each change, so a
restart after a `kill -9` can end what the dead soda left running (`kill_leftovers`).
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from soda.errors import InputError, Interrupted
from soda.system.capture import Capture
from soda.system.tree import descendants as descendants  # soda.daemon.parts uses it

KILL_GRACE_S = 2.0
"""Seconds a timed-out process group gets between SIGTERM and SIGKILL."""

READER_GRACE_S = 2.0
"""Seconds to wait for the output pipe to close once the group is dead. Only a
descendant that escaped the group (its own setsid) can hold it open longer."""

_SECRET_NAME = re.compile(
    # AUTH(?!OR): GIT_AUTHOR_NAME is an identity, not a credential; git commits
    # made by a child need it.
    r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH(?!OR)"
    r"|^(ANTHROPIC_|OPENAI_|AWS_|GH_|GITHUB_)",
    re.IGNORECASE,
)
# Set by a parent pytest; a child pytest (the project's own tests) must not inherit them.
_PARENT_PYTEST = frozenset({"PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST"})


@dataclass(frozen=True)
class LiveCommand:
    """A command soda started that is still running: its process group, the
    command as the caller gave it (inside the jail's wrapper), when it started
    (wall clock) and the group leader's start time in clock ticks since boot
    (`/proc/PID/stat`), which tells the group apart from a later one reusing its id."""

    pgid: int
    command: str
    started: float
    ticks: int | None


_live: dict[int, LiveCommand] = {}
_live_lock = threading.Lock()
_observer: Callable[[list[LiveCommand]], None] | None = None
_stopping = False  # a stop was asked for: interruptible commands die, none starts
_interrupted: set[int] = set()  # groups a stop killed: their `run` raises Interrupted
_lasting: set[int] = set()  # groups of commands a stop spares (a notification)


def observe(observer: Callable[[list[LiveCommand]], None] | None) -> None:
    """Call `observer(live_commands())` whenever a command starts or ends (one
    observer per process: the session that runs the loop)."""
    global _observer
    _observer = observer


def live_commands() -> list[LiveCommand]:
    with _live_lock:
        return sorted(_live.values(), key=lambda c: c.started)


def kill_live() -> int:
    """SIGKILL the group of every command still running; how many there were. Safe
    in a signal handler: it takes no lock (the thread it interrupted may hold one)."""
    live = tuple(_live.values())  # one C-level copy under the GIL
    for command in live:
        kill_tree(command.pgid)
    return len(live)


def interrupt_live() -> int:
    """A first stop signal: SIGKILL every interruptible command and start no new
    one, so soda stops within seconds whatever ran. A killed command's `run` raises
    Interrupted: a killed test run is no evidence. How many were killed. Safe in a
    signal handler: no lock (the interrupted thread may hold one)."""
    global _stopping
    _stopping = True
    groups = [c.pgid for c in tuple(_live.values()) if c.pgid not in _lasting]  # GIL-atomic copy
    for pgid in groups:
        _interrupted.add(pgid)
        kill_tree(pgid)
    return len(groups)


def allow_commands() -> None:
    """Undo `interrupt_live`: commands may run again (a process that goes on after a
    stop, e.g. a test's)."""
    global _stopping
    _stopping = False
    _interrupted.clear()


def kill_leftovers(commands: list[LiveCommand]) -> int:
    """SIGKILL the groups a dead soda left running (read back from its activity
    file): only groups whose leader is still the same process (same start time),
    never a later group that reuses the id. How many were killed."""
    killed = 0
    for command in commands:
        if command.ticks is not None and start_ticks(command.pgid) == command.ticks:
            _signal_group(command.pgid, signal.SIGKILL)
            killed += 1
    return killed


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (None if gone or not Linux)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _changed(pgid: int, command: LiveCommand | None) -> None:
    # One lock for the change and the observer's call: tasks running in parallel
    # threads tell the observer their changes in order, each with the whole list.
    with _live_lock:
        if command is None:
            _live.pop(pgid, None)
        else:
            _live[pgid] = command
        observer = _observer
        if observer is not None:
            with contextlib.suppress(Exception):  # an activity file is never worth a failure
                observer(sorted(_live.values(), key=lambda c: c.started))


@dataclass(frozen=True)
class CommandResult:
    """What a command did. `returncode` is None when it timed out and was killed."""

    command: str
    returncode: int | None
    output: str
    timed_out: bool
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def command_words(command: str) -> list[str]:
    """A shell command's words from its program on: leading `NAME=value`
    assignments (the environment the shell gives the program) are skipped.
    Empty when the command is empty or its quoting is unbalanced."""
    try:
        words = shlex.split(command)
    except ValueError:
        return []
    while words and _ASSIGNMENT.match(words[0]):
        words.pop(0)
    return words


def scrubbed_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of os.environ without credentials or the parent's pytest settings,
    then `extra` on top (extra wins, even for a name that would be scrubbed)."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not _SECRET_NAME.search(name) and name.upper() not in _PARENT_PYTEST
    }
    env.update(extra or {})
    return env


def run(
    command: str | list[str],
    cwd: Path,
    timeout: float,
    env: Mapping[str, str] | None = None,
    output_limit: int = 20_000,
    extra_env: Mapping[str, str] | None = None,
    interruptible: bool = True,
) -> CommandResult:
    """Run `command` (a string goes through /bin/sh -c) in `cwd` for at most `timeout`
    seconds. `env` replaces the scrubbed default environment; `extra_env` is added
    to whichever applies. Raises InputError when `cwd` is not a directory, and
    Interrupted when a stop killed it or came first (unless not `interruptible`)."""
    if not Path(cwd).is_dir():
        raise InputError(f"cannot run {_display(command)!r}: {cwd} is not a directory")
    argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
    if interruptible and _stopping:
        raise Interrupted(f"soda is stopping: `{_label(argv)}` was not started")
    child_env = {**env, **(extra_env or {})} if env is not None else scrubbed_env(extra_env)
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=child_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        # Mirror what a shell would report, so a missing program reads like any
        # other failed command instead of crashing the caller.
        code = 127 if isinstance(exc, FileNotFoundError) else 126
        return CommandResult(_display(command), code, f"{argv[0]}: {exc.strerror}", False, 0.0)
    capture = Capture(output_limit)
    reader = threading.Thread(target=capture.drain, args=(proc.stdout,), daemon=True)
    reader.start()
    if not interruptible:
        _lasting.add(proc.pid)
    _changed(proc.pid, LiveCommand(proc.pid, _label(argv), time.time(), start_ticks(proc.pid)))
    if interruptible and _stopping:  # the stop came while it started: it missed the list
        _interrupted.add(proc.pid)
        kill_tree(proc.pid)
    try:
        timed_out = _wait_or_kill(proc, max(timeout, 0.0))
    except BaseException:  # Ctrl-C or a stop at once: nothing the command started survives
        kill_tree(proc.pid)
        with contextlib.suppress(Exception):
            proc.wait(KILL_GRACE_S)
        raise
    finally:
        _changed(proc.pid, None)
        _lasting.discard(proc.pid)
        killed = proc.pid in _interrupted
        _interrupted.discard(proc.pid)  # the id may come back for another process
    reader.join(READER_GRACE_S)
    if killed:
        raise Interrupted(f"stopped by a signal: `{_label(argv)}` was killed")
    return CommandResult(
        command=_display(command),
        returncode=None if timed_out else proc.returncode,
        output=capture.text(),
        timed_out=timed_out,
        duration_s=round(time.monotonic() - started, 3),
    )


def _wait_or_kill(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait for the child; on timeout kill its whole group. Either way, members of
    the group still running afterwards (background jobs) are killed, so nothing
    the command started outlives it. Returns whether it timed out."""
    timed_out = not _exited_within(proc, timeout)
    if timed_out:
        _signal_group(proc.pid, signal.SIGTERM)
        _wait_for_group(proc, KILL_GRACE_S)
    _signal_group(proc.pid, signal.SIGKILL)
    proc.wait()
    return timed_out


def _exited_within(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait up to `timeout` seconds for the child to exit (and reap it). Where the
    kernel offers a pidfd, woken by its exit: `Popen.wait(timeout)` polls with
    sleeps that double from 1 ms, which adds milliseconds to every short command
    (a test run of the jail takes a few)."""
    pidfd = None
    if hasattr(os, "pidfd_open"):
        with contextlib.suppress(OSError):
            pidfd = os.pidfd_open(proc.pid)
    if pidfd is not None:
        try:
            ready, _, _ = select.select([pidfd], [], [], timeout)
        except (OSError, ValueError):
            ready = []
        finally:
            os.close(pidfd)
        if not ready:
            return proc.poll() is not None
        proc.wait()
        return True
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        return False
    return True


def _wait_for_group(proc: subprocess.Popen[bytes], grace: float) -> None:
    """Give every member of the group (not just the leader) up to `grace` seconds to
    finish its SIGTERM handler: a test runner's workers may be cleaning up."""
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        proc.poll()  # reap the leader so that it stops counting as a member
        if not _group_running(proc.pid):
            return
        time.sleep(0.02)


def _group_running(pgid: int) -> bool:
    """Whether any member of the group is still running. Zombies do not count: the
    orphans among them wait for PID 1 to reap them, which can take a while."""
    if not os.path.isdir("/proc"):  # not Linux: any member, zombie or not
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # exited while we looked
        # After the command name: state, ppid, pgrp (proc(5)).
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def kill_tree(pgid: int) -> None:
    """SIGKILL the group and every process below its leader. The jail's inner bwrap
    has a group of its own and dies with its parent only once its setup has asked
    for that, so a stop at a command's start must name it; and a process may fork
    while we look. So everything is first stopped (a pending SIGSTOP makes a fork in
    progress fail, so a stopped process has no child we have not seen), to a fixed
    point, and only then killed."""
    _signal_group(pgid, signal.SIGSTOP)
    stopped: set[int] = set()
    for _ in range(100):  # a bound: each round stops at least one new process
        new = [pid for pid in descendants(pgid) if pid not in stopped]
        if not new:
            break
        for pid in new:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)
            stopped.add(pid)
    _signal_group(pgid, signal.SIGKILL)
    for pid in stopped:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    # ESRCH: the group is already gone; EPERM: only zombies of another owner remain.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _label(argv: list[str]) -> str:
    """The command as its caller wrote it: what follows the jail's `bwrap ... --`
    and `/bin/sh -c`."""
    if argv and Path(argv[0]).name == "bwrap" and "--" in argv:
        argv = argv[argv.index("--") + 1 :]
    if len(argv) > 2 and argv[1] == "-c" and argv[0].endswith("sh"):
        return argv[2]
    return shlex.join(argv)


def _display(command: str | list[str]) -> str:
    return command if isinstance(command, str) else shlex.join(command)
