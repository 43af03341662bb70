"""Where the shipped agents and contracts are: inside the wheel, or the source tree.

An installed soda carries `agents/` and `schemas/` as `soda/_bundled/...`; a source
checkout (or an editable install) keeps them at the top of the repository.
"""

from __future__ import annotations

from pathlib import Path

from soda.errors import StructuralError

_PACKAGE = Path(__file__).resolve().parent.parent


def resource_dir(name: str) -> Path:
    """The directory of bundled resource `name` ("agents" or "schemas")."""
    for candidate in (_PACKAGE / "_bundled" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise StructuralError(f"soda is installed without its {name}/ directory; reinstall soda")
