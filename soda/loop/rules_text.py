"""What the agents that plan, change or verify code are told about the tests and
the merge, rendered from the configuration in force (never written into a prompt
by hand, where it would go stale): the exact test command and how to run one
test with it, the changes the gate holds for a person (`soda.gate.rules`), how
long a held change waits, and the plan approval threshold.

Without it a model guesses: in the jail a hand-written `python -m pytest` can
run another interpreter or an installed copy of the project, and a natural
change (a fixture in conftest.py) waits an hour for a person in an unattended
run, then is rejected. The text depends on the configuration alone, so it sits
with the stable inputs (after the spec) and stays in the prompt cache.
"""

from __future__ import annotations

from typing import Literal

from soda.config import RISK_LEVELS, Config
from soda.gate.rules import held_changes
from soda.tools.tests import SELECTOR_RULE, selected_command

Role = Literal["planner", "executor", "verifier"]
"""`planner`: the planner and the orienter; `executor`: the executor;
`verifier`: the verifier, which judges claims of tested and merged work by them."""

EXAMPLE_SELECTOR = "tests/test_x.py::test_name"


def tests_and_merges(config: Config, role: Role) -> str:
    """The `tests_and_merges` input of `role`'s first message."""
    command = config.project.test_command
    example = selected_command(command, EXAMPLE_SELECTOR, config.root)
    if role == "executor":
        how = (
            f"Run it with your `run_tests` tool, in your worktree: `selector` narrows it to "
            f'one file or test, e.g. selector "{EXAMPLE_SELECTOR}" runs `{example}` '
            f'({SELECTOR_RULE}); selector "" runs the whole suite.'
        )
    elif role == "verifier":
        how = (
            "Your `run_tests` tool runs it on the milestone tip (once per tree: asking again "
            f"costs nothing); its `selector` narrows it to one file or test (e.g. selector "
            f'"{EXAMPLE_SELECTOR}" runs `{example}`). A task is done only when the tests '
            "that show it pass there, whatever a commit message or a task comment says."
        )
    else:
        how = (
            "The executor runs it with its `run_tests` tool, whose `selector` narrows it to "
            f'one file or test (e.g. selector "{EXAMPLE_SELECTOR}" runs `{example}`). In '
            f'`tool_hints` write "run_tests selector {EXAMPLE_SELECTOR}", never a test '
            "command of your own."
        )
    timeout = _duration(config.approval.timeout)
    threshold = config.approval.risk_threshold
    at_or_above = threshold if threshold == RISK_LEVELS[-1] else f"{threshold} or higher"
    held = ";\n".join(f"- {rule}" for rule in held_changes(config.gate.protected)) + "."
    return executors(config, role) + (
        f"Test command: `{command}`. The gate runs exactly this, in the jail, on a clean "
        "checkout of each change merged with the milestone, and merges only if no test "
        f"that passed before fails and the task's target tests pass. {how} Do not run the tests "
        "any other way: in the jail a hand-written command (`python -m pytest`, `pytest`) "
        "may run another interpreter or an installed copy of the project instead of the "
        "code in the worktree.\n\n"
        "Approval threshold ([approval] risk_threshold = "
        f'"{threshold}"): a plan with a task of risk {at_or_above} waits for a person '
        f"before any of it runs, and is rejected if nobody approves it within {timeout}.\n\n"
        "The gate never merges these changes on its own word: the merge waits for a "
        f"person, and is rejected if nobody approves it within {timeout} "
        "([approval] timeout). A change that\n"
        f"{held}\n"
        "An unattended run cannot wait for that: avoid these unless the task cannot be "
        "done without them, and then say so (and why) in the plan or your summary."
    )


def executors(config: Config, role: Role) -> str:
    """For the planner, when `[executor] allowed` lets a task choose: how to ask."""
    allowed = [name for name in config.executor.allowed if name != config.executor.backend]
    if role != "planner" or not allowed:
        return ""
    names = ", ".join(f'"executor:{name}"' for name in allowed)
    return (
        f"Executors: every task is done by {config.executor.backend} unless its "
        f"`tool_hints` name another the person allows ({names}); ask for one only when "
        "the task suits it better.\n\n"
    )


def _duration(seconds: float) -> str:
    """`seconds` as a person would say it (`1 hour`, `90 minutes`, `45 seconds`)."""
    for size, unit in ((86_400, "day"), (3600, "hour"), (60, "minute")):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''} ({seconds:g} s)"
    return f"{seconds:g} seconds"
