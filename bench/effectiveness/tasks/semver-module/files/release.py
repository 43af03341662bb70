"""Release helpers: which tag is the latest release."""


def latest(tags: list[str]) -> str | None:
    """The tag of the newest release, or None when there is none."""
    releases = [tag for tag in tags if tag.startswith("v")]
    return max(releases) if releases else None
