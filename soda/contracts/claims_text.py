"""Claims as agents read them: a compact text with the same information as the
JSON, and fewer tokens. No indentation, no quoting, no nulls or empty fields,
SHAs cut to 10 characters; one line per item, one heading per group.

Ordered for the prompt cache, most stable first, in three parts (`claims_parts`):
the learnings (durable facts, changed when one is learned or retired); the
standing work (the root task, the open, in-progress and blocked tasks: the
oldest of each, so a new task leaves them as they were; and the tests failing on
the milestone tip, until the work fixes them); then what changes every
iteration: the tasks closed and commented lately, the person's pending words,
the recent iterations, the last attempt, the code (new commits, the head, the
tests) and, last, the iteration's number and budget. A provider that caches
marks the end of each part (`soda.agent.definition.first_message`): a new commit
or a closed task leaves the first two in the cache, a task worked from the
backlog the first.
"""

from __future__ import annotations

from collections.abc import Iterable

from soda.contracts.claims import (
    Claims,
    CodeClaims,
    ForgeClaims,
    HumanClaims,
    LastAct,
    ProjectClaims,
    TaskBrief,
    TestFailure,
    TestsBrief,
    WorkClaims,
)

SHA_CHARS = 10


def short(sha: str) -> str:
    return sha[:SHA_CHARS]


def claims_text(claims: Claims) -> str:
    """The whole text: what lasts, then what changes every iteration."""
    return "\n\n".join(part for part in claims_parts(claims) if part)


def claims_parts(claims: Claims) -> tuple[str, str, str]:
    """The learnings, the standing work, and what changes every iteration; any
    may be ''."""
    changing = [
        _recent_work(claims.work),
        _human(claims.human),
        _forge(claims.forge),
        _history(claims.project),
        _last_act(claims.project.last_act),
        _code(claims.code),
        _status(claims.project),
    ]
    standing = [_standing_work(claims.work), _failing_on_tip(claims.code.tests)]
    return (
        _learnings(claims.project),
        "\n\n".join(part for part in standing if part),
        "\n\n".join(part for part in changing if part),
    )


def _section(title: str, lines: Iterable[str]) -> str:
    body = [line for line in lines if line]
    return "\n".join([f"### {title}", *body]) if body else ""


def _field(name: str, value: object) -> str:
    """`name: value`, or '' for None and empty values (they say nothing)."""
    if value is None or value == "" or value == []:
        return ""
    return f"{name}: {value}"


def _indent(text: str) -> str:
    """A multi-line value under its item: continuation lines start with two spaces."""
    return text.strip().replace("\n", "\n  ")


def _learnings(project: ProjectClaims) -> str:
    return _section("learnings (newest first)", (f"- {item}" for item in project.learnings))


def _task(task: TaskBrief) -> str:
    parent = f" (parent #{task.parent_id})" if task.parent_id is not None else ""
    reason = f" - {_indent(task.reason)}" if task.reason else ""
    return f"- #{task.id} {task.title}{parent}{reason}"


def _tasks(groups: Iterable[tuple[str, list[TaskBrief]]]) -> list[str]:
    lines = []
    for name, tasks in groups:
        if tasks:
            lines.append(f"{name}:")
            lines.extend(_task(task) for task in tasks)
    return lines


def _standing_work(work: WorkClaims) -> str:
    """The root and the unfinished tasks (the oldest of each status)."""
    lines = []
    if work.root is not None:
        root = work.root
        lines.append(f"root (the spec): #{root.id} {root.title} [{root.status}]")
    groups = (("open", work.open), ("in progress", work.in_progress), ("blocked", work.blocked))
    return _section("tasks (Trace)", [*lines, *_tasks(groups)])


def _recent_work(work: WorkClaims) -> str:
    """The tasks closed lately and the newest comments."""
    lines = _tasks([("recently closed", work.recently_closed)])
    if work.comments:
        lines.append("comments (newest first):")
        lines.extend(
            f"- #{c.task_id} {c.author} {c.created_at}: {_indent(c.body)}" for c in work.comments
        )
    return _section("tasks (Trace), lately", lines)


def _human(human: HumanClaims) -> str:
    lines = [
        f"- input {item.id} [{item.kind}] {item.received_at}: {_indent(item.text)}"
        for item in human.pending
    ]
    if human.paused:
        lines.append("paused: a person asked soda to pause")
    return _section("from the person (pending, oldest first)", lines)


def _history(project: ProjectClaims) -> str:
    lines = []
    for it in project.recent:
        said = "; ".join(
            part
            for part in (
                _field("intent", it.intent),
                _field("decision", it.decision),
                _field("outcome", it.outcome),
                _field("summary", it.summary),
            )
            if part
        )
        lines.append(f"- {it.number}: {_indent(said)}")
    loop = project.loop
    lines.append(f"loop: {'DETECTED' if loop.detected else 'no'}; {loop.detail}")
    if loop.warning:
        lines.append(f"loop warning: {loop.warning}")
    return _section("recent iterations (newest first)", lines)


def _failures(failing: list[TestFailure], total: int) -> list[str]:
    lines = [
        f"- {f.test}: {_indent(f.first_lines)}" if f.first_lines else f"- {f.test}" for f in failing
    ]
    if total > len(failing):
        lines.append(f"- ... {total - len(failing)} more failing")
    return lines


def _last_act(act: LastAct | None) -> str:
    if act is None:
        return ""
    detail = f" - {_indent(act.detail)}" if act.detail else ""
    lines = [
        f"iteration {act.iteration}: {act.outcome}{detail}",
        _field("intent", act.intent),
        _field("tests after the change", act.tests),
    ]
    if act.failing:
        lines.append("failing:")
        lines.extend(_failures(act.failing, act.failing_total))
    for task in act.tasks:
        head = f"task #{task.task_id}" if task.task_id is not None else "task (new)"
        said = f": {_indent(task.summary)}" if task.summary else ""
        lines.append(f"{head} {task.title} [{task.status}]{said}")
    if act.diffstat:
        lines.append("changed:")
        lines.append(act.diffstat)
    return _section("last attempt (ACT)", lines)


def _failing_on_tip(tests: TestsBrief | None) -> str:
    """The tests failing on the milestone tip, with their first lines: they stand
    until the work fixes them (the run's commit and counts are with the code)."""
    if tests is None or not tests.failing:
        return ""
    return _section(
        "tests failing on the milestone tip (its latest test run)",
        _failures(tests.failing, tests.failing_total),
    )


def _tests(tests: TestsBrief | None) -> list[str]:
    if tests is None:
        return []
    listed = " (the failing ones are listed above)" if tests.failing else ""
    return [f"tests at {short(tests.commit)}: {tests.summary}{listed}"]


def _code(code: CodeClaims) -> str:
    lines = [f"branch {code.branch} from base {short(code.base_commit)}"]
    if code.uncommitted:
        lines.append(f"uncommitted in the person's checkout: {', '.join(code.uncommitted)}")
    if code.commits:
        lines.append(f"commits since base: {code.commits_total} (newest first):")
        lines.extend(f"- {short(c.sha)} {c.date} {c.author}: {c.subject}" for c in code.commits)
    if code.diffstat:
        lines.append("changed since base:")
        lines.append(code.diffstat)
    # Files the diffstat does not list (it is cut at a length of its own).
    unlisted = [path for path in code.files_changed if f"{path} |" not in code.diffstat]
    if unlisted:
        lines.append(f"also changed: {', '.join(unlisted)}")
    lines.extend(_tests(code.tests))
    lines.append(f"head: {short(code.head)}")
    return _section("code (git)", lines)


def _status(project: ProjectClaims) -> str:
    budget = project.budget
    return _section(
        "this iteration",
        [
            f"iteration {project.iteration} of at most {project.max_iterations}",
            f"budget: ${budget.cost_usd:g} of ${budget.max_cost_usd:g} spent; "
            f"tokens this iteration {budget.tokens_this_iteration} of "
            f"{budget.max_tokens_per_iteration}",
        ],
    )


def _forge(forge: ForgeClaims | None) -> str:
    """The pull request: failing checks (CI, a second gate) with what they said."""
    if forge is None:
        return ""
    state = "draft" if forge.draft else "ready for review"
    lines = [f"#{forge.pull_request} ({state}), head {short(forge.head)}; {forge.passed} passed"]
    lines += [
        f"- FAILING {c.name} ({c.conclusion})" + (f": {_indent(c.excerpt)}" if c.excerpt else "")
        for c in forge.failing
    ]
    if forge.pending:
        lines.append(f"running: {', '.join(forge.pending)}")
    return _section("pull request checks (CI on the forge)", lines)
