"""The milestone: one spec, one branch (`soda/<spec-slug>`), one root task in Trace."""

from __future__ import annotations

import re

from soda.config import Config


def slugify(text: str) -> str:
    """Lowercase words joined by dashes, safe in a git branch name."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug or "spec"


def milestone_name(config: Config) -> str:
    """The milestone's name: the spec file's stem as a slug (`specs/SPEC.md` -> `spec`).

    The file name, not its heading, so that editing the spec keeps the milestone.
    """
    return slugify(config.spec_path.stem)


def milestone_branch(config: Config) -> str:
    return f"soda/{milestone_name(config)}"
