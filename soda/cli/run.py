"""How `soda run` and `soda demo` show a run: the milestone branch first, each
merge commit as it lands, and a last line saying how the run ended."""

from __future__ import annotations

import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from soda.loop.host import IterationResult, Run


class MergeWatch:
    """A printer for the loop that also says, after each line, whether the
    latest iteration of this run landed a merge commit (read from its record),
    so every merge is printed with its commit as it happens."""

    def __init__(self, run: Run, say: Callable[[str], None]) -> None:
        self.run = run
        self.say = say
        self.first = run.next_number
        self.merged: list[str] = []

    def __call__(self, line: str) -> None:
        self.say(line)
        self.check()

    def check(self) -> None:
        from soda.store import history

        latest = self.run.next_number - 1
        if latest < self.first:
            return
        row = history.iteration(self.run.db, latest)
        commit = row["merged_commit"] if row else None
        if commit and commit not in self.merged:
            self.merged.append(commit)
            self.say(f"merged: {commit} onto {self.run.milestone.branch} (iteration {latest})")


def drive(
    run: Run, say: Callable[[str], None], once: bool = False
) -> tuple[IterationResult, str | None]:
    """Run the loop, printing the milestone branch first and every merge commit
    as it lands; the result and the last merge commit of this run (or None).
    SIGTERM and SIGINT stop it as they stop the daemon (soda.system.lifecycle)."""
    from soda.contracts.outcomes import Ending, RunStatus
    from soda.loop.host import IterationResult
    from soda.system.lifecycle import stop_signals

    config = run.config
    branch = run.milestone.branch
    tip = run.repo.heads[branch].commit.hexsha
    say(f"milestone branch {branch} (from {config.project.base_branch}, tip {tip[:10]})")
    watch = MergeWatch(run, say)

    # SIGTERM/SIGINT as for the daemon: the first kills the commands running and
    # stops at the next safe point, the second at once; the records close.
    try:
        with stop_signals(run.stop_soon):
            result = run.loop(watch, once=once, should_stop=lambda: run.stop_requested)
    except KeyboardInterrupt:
        run.finish(RunStatus.INTERRUPTED, "stopped at once by a second signal")
        number = run.next_number - 1
        result = IterationResult(number, Ending.INTERRUPTED, "stopped at once by a second signal")
    watch.check()
    return result, (watch.merged[-1] if watch.merged else None)


def ending_line(result: IterationResult, branch: str, merged: str | None) -> str:
    """The last line of `soda run` and `soda demo`: how the run ended, in words,
    with its exit code. The reason itself was printed by the loop already."""
    from soda.contracts.outcomes import Ending

    n, cmd = result.number, soda_command()
    where = (
        f"; merged {merged[:10]} on {branch}"
        if merged
        else f"; nothing merged on {branch} in this run"
    )
    text = {
        Ending.DONE: f"the spec is met (iteration {n}){where}",
        Ending.CONTINUE: (
            f"iteration {n} finished and the spec is not met yet: more to do{where};"
            f" run `{cmd} run` to go on"
        ),
        Ending.STUCK: f"soda needs a person (the reason is above; `{cmd} show {n}`)",
        Ending.HALT: f"something structural is wrong (`{cmd} show {n}`, table halts)",
        Ending.TRANSIENT: f"a transient failure outlasted the retries; run `{cmd} run` to resume",
        Ending.INTERRUPTED: f"stopped in iteration {n}; run `{cmd} run` to resume",
    }[result.ending]
    return f"{result.ending.name}: {text} (exit {result.ending.exit_code})"


def soda_command() -> str:
    """How a person can run this soda again from a shell: `soda` when that is on
    PATH and is this program, else the running script's absolute path, else
    `PYTHON -m soda`."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is None or argv0.name == "__main__.py" or argv0.suffix == ".py":
        return f"{shlex.quote(sys.executable)} -m soda"
    on_path = shutil.which("soda")
    if on_path and argv0.exists() and Path(on_path).resolve() == argv0.resolve():
        return "soda"
    if argv0.is_file():
        return shlex.quote(str(argv0.absolute()))
    return f"{shlex.quote(sys.executable)} -m soda"
