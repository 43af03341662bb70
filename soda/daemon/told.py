"""What soda writes on an issue, in one place: the one-machine queue
(soda.daemon.issues) and the fleet's (soda.daemon.issue_fleet) say the same
things in the same words; only what a person can look at differs."""

from __future__ import annotations


def start(branch: str | None, spec: str | None = None, run: str | None = None) -> str:
    """The comment when work on an issue starts (`run`: its fleet run)."""
    where = f" in the fleet (run `{run}`)" if run else ""
    named = f" `{spec}`" if spec else ""
    return (
        f"soda is working on this issue{where} on the branch `{branch}`, from the spec{named}"
        " written from it. A comment here from a person with write access is read as a"
        " correction; `/soda stop` stops the work."
    )


def merged(number: int, commit: str, branch: str | None) -> str:
    """The short line for an iteration that merged on the issue's branch."""
    return f"Iteration {number} merged {commit[:12]} on `{branch}`."


def done(pr: int | None, branch: str | None, then: str = "") -> str:
    """DONE: where the work is (`then`: what follows, e.g. waiting for checks)."""
    where = f"pull request #{pr}" if pr else f"the branch `{branch}`"
    return f"DONE: the spec is met; the work is in {where}.{then}"


def stuck(number: int, reason: str, can_do: str) -> str:
    """STUCK: why, and what a person can do."""
    return f"STUCK at iteration {number}: {reason}\n\n{can_do}"


def halted(number: int, reason: str, look: str, reply: str) -> str:
    """HALT: why, where a person looks, and what a reply does."""
    return (
        f"HALT at iteration {number}: {reason}\n\nsoda stopped work on this issue;"
        f" a person must look ({look}). {reply}"
    )


def stopped(why: str | None) -> str:
    """Work on the issue was cancelled (a writer's `/soda stop` or removed label)."""
    return f"soda stopped work on this issue ({why or 'cancelled'})."
