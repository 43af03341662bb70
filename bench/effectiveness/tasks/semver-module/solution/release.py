"""Release helpers: which tag is the latest release."""

from semver import Version, parse


def latest(tags: list[str]) -> str | None:
    """The tag of the newest release by semantic version, or None when there is none."""
    versions: list[tuple[Version, str]] = []
    for tag in tags:
        try:
            versions.append((parse(tag), tag))
        except ValueError:
            continue
    if not versions:
        return None
    return max(versions, key=lambda pair: pair[0])[1]
