"""Who may serve: `soda mcp serve` speaks for the person, so nothing running in
soda's jail (the executor's commands, a coding CLI executor, a test run) may
start it, and it serves only a state directory soda made and this process can
write.

The jail already hides the real state directory (a worktree is mounted over
the checkout, and a state directory outside it is replaced by an empty one),
so a server started there would find no database; these checks say so first,
and do not rest on that alone:

- the jail's marker in the environment (`soda.system.jail.JAIL_MARK`, set for
  every jailed command, also with `sandbox.mode = "none"`);
- bubblewrap as the process namespace's first process (the jail's own PID
  namespace; a command cannot unset that one);
- the database present, and a file creatable in the inbox.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from soda.config import Config
from soda.errors import InputError
from soda.human.write import inbox_dir
from soda.system.jail import JAIL_MARK

REFUSED = "soda mcp serve refuses to start inside soda's jail"


def in_jail(environ: dict[str, str] | None = None, proc: Path = Path("/proc")) -> str | None:
    """Why this process looks jailed (None: it does not)."""
    env = os.environ if environ is None else environ
    if env.get(JAIL_MARK):
        return f"{JAIL_MARK} is set"
    try:
        first = (proc / "1" / "comm").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return "its PID namespace is bubblewrap's" if first == "bwrap" else None


def refuse_in_jail() -> None:
    """Raise InputError if this process looks jailed: checked before anything
    else (even soda.toml) is read."""
    reason = in_jail()
    if reason is not None:
        raise InputError(f"{REFUSED} ({reason}): only the person speaks for the person")


def check_state(config: Config) -> None:
    """Raise InputError unless `config`'s state directory is one soda made
    (its database) and this process can write its inbox."""
    if not config.db_path.is_file():
        raise InputError(
            f"no soda database at {config.db_path}: run `soda init` (and soda) in"
            f" {config.root} first; soda mcp serve only serves a repository soda works on"
        )
    inbox = inbox_dir(config.state_dir)
    probe = inbox / f".mcp-probe-{secrets.token_hex(4)}.tmp"
    try:
        inbox.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise InputError(
            f"cannot write soda's inbox {inbox} ({exc.strerror or exc}): soda mcp serve"
            " needs the state directory the person's soda uses"
        ) from None
