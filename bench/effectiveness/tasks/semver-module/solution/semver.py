"""Semantic versions (https://semver.org, 2.0.0): parse, print and order them."""

import re
from dataclasses import dataclass, field
from functools import total_ordering

_NUMBER = r"0|[1-9]\d*"
_IDENTIFIER = r"[0-9A-Za-z-]+"
_PATTERN = re.compile(
    rf"v?(?P<major>{_NUMBER})\.(?P<minor>{_NUMBER})\.(?P<patch>{_NUMBER})"
    rf"(?:-(?P<pre>{_IDENTIFIER}(?:\.{_IDENTIFIER})*))?"
    rf"(?:\+(?P<build>{_IDENTIFIER}(?:\.{_IDENTIFIER})*))?"
)


@total_ordering
@dataclass(frozen=True, eq=False)
class Version:
    major: int
    minor: int
    patch: int
    prerelease: tuple[str, ...] = ()
    build: str = field(default="")

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += "-" + ".".join(self.prerelease)
        if self.build:
            text += "+" + self.build
        return text

    def _key(self) -> tuple[object, ...]:
        """What precedence compares: the numbers, then the pre-release (none is highest)."""
        pre = tuple(
            (0, int(part), "") if part.isdigit() else (1, 0, part) for part in self.prerelease
        )
        return (self.major, self.minor, self.patch, not self.prerelease, pre)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() == other._key()

    def __lt__(self, other: "Version") -> bool:
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())


def parse(text: str) -> Version:
    """The version `text` spells (a leading `v` allowed); ValueError otherwise."""
    match = _PATTERN.fullmatch(text)
    if match is None:
        raise ValueError(f"not a semantic version: {text!r}")
    pre = match["pre"]
    return Version(
        int(match["major"]),
        int(match["minor"]),
        int(match["patch"]),
        tuple(pre.split(".")) if pre else (),
        match["build"] or "",
    )
