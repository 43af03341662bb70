"""The directory an agent's file tools are confined to, and the error they show the model.

`Sandbox.resolve` turns a path the model wrote into a real path inside the root,
or refuses with a `ToolError` whose message the model reads and can act on. It
guards the file tools against mistakes and casual escapes (absolute paths, `..`,
symlinks pointing out, git internals, soda's own state); it is not an OS-level
jail: `run_command` runs a shell in the root and is bounded only by its cwd,
environment and timeout.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path, PurePosixPath


class ToolError(Exception):
    """A tool call the model got wrong. The message is shown to the model, so it
    says what was wrong and, where it helps, what to do instead. `detail` is
    text the model needs to see as it is, on lines of its own after the one-line
    message (the lines of a file closest to a failed edit's old text)."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


class Sandbox:
    """A root directory plus names and paths inside it that tools must not touch."""

    def __init__(
        self, root: Path, deny: Sequence[str] = (".git",), extra_deny: Sequence[Path] = ()
    ) -> None:
        self.root = Path(os.path.realpath(root))
        # Compared case-insensitively: on a case-insensitive filesystem `.GIT` is `.git`.
        self.deny = frozenset(name.casefold() for name in deny)
        self.extra_deny = tuple(Path(os.path.realpath(p)) for p in extra_deny)

    def resolve(self, rel: str) -> Path:
        """The real path `rel` names inside the root, or ToolError saying why not."""
        if "\0" in rel:
            raise ToolError("path contains a NUL character")
        pure = PurePosixPath(rel if rel.strip() else ".")
        if pure.is_absolute() or Path(rel).is_absolute():
            raise ToolError(
                f"{rel!r} is absolute; give a path relative to the repository root, "
                "e.g. 'src/app.py'"
            )
        self._check_lexically(rel, pure.parts)
        # realpath follows every symlink it can, including a dangling one at the
        # end, and keeps the non-existent tail as written: that covers files the
        # tool is about to create.
        real = Path(os.path.realpath(self.root / pure))
        if not real.is_relative_to(self.root):
            raise ToolError(f"{rel!r} resolves outside the working directory")
        self._check_denied(rel, real)
        return real

    def permits(self, path: Path) -> bool:
        """Whether an existing absolute path (found by walking the root) may be shown."""
        try:
            self.resolve(self.relative(path))
        except ToolError:
            return False
        return True

    def is_denied_dir(self, path: Path) -> bool:
        """Whether a directory met while walking must be skipped (cheap: no realpath)."""
        return path.name.casefold() in self.deny or path in self.extra_deny

    def relative(self, path: Path) -> str:
        """How a path inside the root is written back to the model."""
        return path.relative_to(self.root).as_posix() if path != self.root else "."

    def _check_lexically(self, rel: str, parts: tuple[str, ...]) -> None:
        depth = 0
        for part in parts:
            depth = depth - 1 if part == ".." else depth + (part != ".")
            if depth < 0:
                raise ToolError(f"{rel!r} leads outside the working directory")
            if part.casefold() in self.deny:
                raise ToolError(f"{rel!r} is off limits ({part} may not be read or changed)")

    def _check_denied(self, rel: str, real: Path) -> None:
        inside = real.relative_to(self.root).parts
        if any(part.casefold() in self.deny for part in inside):
            raise ToolError(f"{rel!r} leads into a path that is off limits")
        for denied in self.extra_deny:
            if real.is_relative_to(denied):
                raise ToolError(f"{rel!r} is off limits (soda's own state)")
