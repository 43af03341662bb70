"""What soda writes on the forge: the pull request's title and body, and its replies.

The body is the latest iteration's report and a link-free summary of what
changed (commit subjects and the diffstat since the base): text that came from
agents or commits never pings anyone or links anywhere on the forge, so `@name`,
`#123` and URLs are defused. Every text soda posts ends with a hidden marker, so
soda knows its own comments when it reads them back.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

MARKER = "<!-- soda -->"
"""Ends every comment and body soda writes (an HTML comment: invisible on the page)."""
MAX_BODY_CHARS = 60_000
"""GitHub refuses bodies over 65536 characters."""
MAX_SUBJECTS = 30

_MENTION = re.compile(r"(?<![\w`])([@#])(?=[\w-])")
_URL = re.compile(r"\b(https?|ftp)://", re.IGNORECASE)


def defuse(text: str) -> str:
    """Text that mentions no one and links nowhere: `@name` -> `@ name`, `#12` ->
    `# 12`, `https://` -> `https[:]//`."""
    text = _MENTION.sub(r"\1 ", text)
    return _URL.sub(r"\1[:]//", text)


_ISSUE_BRANCH = re.compile(r"^soda/issue-(\d+)$")


def closing(branch: str, text: str) -> str:
    """`text` with `Closes #N` on its own line when `branch` is an issue's milestone
    (`soda/issue-N`, from `[tracker]`): the issue closes when the pull request
    merges, by the forge's own rule. The one reference soda writes undefused."""
    found = _ISSUE_BRANCH.match(branch)
    if found is None or f"Closes #{found.group(1)}" in text:
        return text
    return f"Closes #{found.group(1)}\n\n{text}"


def title(spec_title: str) -> str:
    return defuse(f"soda: {spec_title}")[:250]


def body(
    spec_title: str,
    report: str,
    subjects: Sequence[str],
    commits_total: int,
    diffstat: str,
    state: str,
) -> str:
    """The pull request's body: what the milestone is, where it stands, the last
    iteration's report, and what changed."""
    lines = [
        f"**Milestone:** {defuse(spec_title)}",
        f"**State:** {state}",
        "",
        "### Last iteration",
        defuse(report.strip()) or "(none yet)",
        "",
        f"### Changes ({commits_total} commits since the base)",
    ]
    lines += [f"- {defuse(subject)}" for subject in subjects[:MAX_SUBJECTS]]
    if commits_total > min(len(subjects), MAX_SUBJECTS):
        lines.append(f"- ... and {commits_total - min(len(subjects), MAX_SUBJECTS)} more")
    if diffstat.strip():
        lines += ["", "```", diffstat.replace("```", "'''").rstrip(), "```"]
    lines += ["", "Written by soda; review comments from people with write access"]
    lines += ["become corrections for its next iteration.", MARKER]
    text = "\n".join(lines)
    if len(text) > MAX_BODY_CHARS:
        text = text[: MAX_BODY_CHARS - 20] + "\n[...]\n" + MARKER
    return text


_REPLY = re.compile(r"<!-- soda reply (\w+):(\d+) ([0-9a-f]+) -->")


_NAMES = {"review": "review", "issue_comment": "comment", "review_comment": "comment"}


def reply(commit: str, kind: str, item_id: int, author: str) -> str:
    """soda's answer on a correction's thread (an inline comment's own thread, else
    the conversation, naming whose review or comment it answers); its marker names
    the comment, so a reply read back after a crash counts as given."""
    what = "" if kind == "review_comment" else f" ({defuse(author)}'s {_NAMES[kind]})"
    return (
        f"Addressed in {commit[:12]}{what} (soda).\n\n"
        f"<!-- soda reply {kind}:{item_id} {commit} -->\n{MARKER}"
    )


def replied_to(text: str) -> tuple[str, int, str] | None:
    """(kind, comment id, commit) that a reply of soda's answers, if it is one."""
    match = _REPLY.search(text)
    return (match.group(1), int(match.group(2)), match.group(3)) if match else None


def is_soda(text: str) -> bool:
    return MARKER in text
