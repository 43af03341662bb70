"""One replay for bench/replay.py: a project set up once (`prepare`), then one
change of one commit run through soda's loop for one iteration (`replay`), and
what the gate decided (`Outcome`).

The model is a FunctionModel: ORIENT's agents answer at once (claims checked,
spec not met), the planner plans the one task (the commit's subject and
message, its target tests), and the executor writes the change's files with
`write_file` (a deleted file: `run_command rm`) and submits. Everything after
the model is soda's own: the worktree, the commit, the merge, the test runs in
the jail on clean checkouts, the gate's rules.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from bench.replay_commits import Change, Commit, git
from soda.config import (
    ActConfig,
    ApprovalConfig,
    Config,
    GateConfig,
    LoopConfig,
    ModelConfig,
    ProjectConfig,
    SandboxConfig,
)
from soda.gate.rules import SHADOWING_NAMES, TEST_CONFIG_FILES
from soda.llm.base import ModelRequest
from soda.llm.function import FunctionModel, Reply, first_turn, submit
from soda.loop.host import open_run
from soda.repo.git import ensure_excluded, open_repo
from soda.store import approvals

SCRIPT = "bench-script.json"


def prepare(repo: Path, work: Path, python: str, pytest_args: str, say: Any) -> tuple[Path, str]:
    """The clone under `work` (made once) and the test command: `python`'s
    pytest, or a `.venv` in the clone with pytest installed (made once; a
    `src/` layout put on its path by a .pth file, as an editable install
    would). Returns (the clone, the test command)."""
    clone = work / "repo"
    started = time.perf_counter()
    if not (clone / ".git").exists():
        work.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "clone", "-q", "--shared", str(repo), str(clone)], check=True)
    for pattern in (".venv/", "state/", "specs/", "check-*/"):
        ensure_excluded(open_repo(clone), pattern)
    if python:
        command = f"{shlex.quote(python)} -m pytest -q"
    else:
        venv = clone / ".venv"
        if not (venv / "bin" / "python").exists():
            say(f"making {venv} with pytest (once)")
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            subprocess.run(
                [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "pytest"],
                check=True,
                stdout=subprocess.DEVNULL,
            )
        if (clone / "src").is_dir():
            [site] = (venv / "lib").glob("python3*/site-packages")
            (site / "replay-src.pth").write_text(f"{clone / 'src'}\n")
        command = ".venv/bin/python -m pytest -q"
    say(f"set up in {time.perf_counter() - started:.1f} s")
    return clone, f"{command} {pytest_args}".strip()


@dataclass
class Outcome:
    variant: str
    verdict: str
    """merged, held (for a person) or refused."""
    reason: str
    rules: list[str] = field(default_factory=list)
    """For held: the hold rules that held it."""
    refusal: str = ""
    """For refused: what kind of refusal (regression, targets, ...)."""
    seconds: float = 0.0
    merged_commit: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "verdict": self.verdict,
            "reason": self.reason,
            "rules": self.rules,
            "refusal": self.refusal,
            "seconds": round(self.seconds, 1),
            "merged_commit": self.merged_commit,
        }


def hold_rule(item: str) -> str:
    """The hold rule (soda/gate/rules.py, rule 5) an approval item comes from."""
    if "missing or skipped now" in item:
        return "missing-test"
    path = item.removeprefix("changes test infrastructure: ")
    if path.endswith("(test runner section)"):
        return "runner-settings"
    if "(mentions " in path:
        return "report-words"
    pure = PurePosixPath(path)
    if pure.name in TEST_CONFIG_FILES:
        return f"test-config:{pure.name}"
    if pure.suffix == ".pth" or pure.parts[0].removesuffix(".py") in SHADOWING_NAMES:
        return "shadowing"
    return "protected"


REFUSALS = (
    ("passed before and fail now", "regression"),
    ("did not fail before", "new-failure"),
    ("target test", "targets"),
    ("refusing to merge", "no-report"),
    ("did not run the checkout's code", "foreign-code"),
    ("timed out", "timeout"),
)


def refusal(reason: str) -> str:
    return next((kind for words, kind in REFUSALS if words in reason), "other")


def replay(
    clone: Path, command: str, state: str, commit: Commit, kind: str, change: Change
) -> Outcome:
    """One iteration of soda on `commit`'s parent, the executor writing `change`."""
    started = time.perf_counter()
    name = f"r-{commit.short}-{kind}"
    base = f"replay/{commit.short}"
    git(clone, "branch", "-f", base, commit.parent)
    if git(clone, "branch", "--list", f"soda/{name}").strip():  # an earlier bench run's
        git(clone, "branch", "-D", f"soda/{name}")
    spec = clone / "specs" / f"{name}.md"
    spec.parent.mkdir(exist_ok=True)
    spec.write_text(f"# {commit.subject}\n\n{commit.message}\n", encoding="utf-8")
    (clone / state).mkdir(parents=True, exist_ok=True)
    (clone / state / SCRIPT).write_text('{"responses": []}')
    config = Config(
        project=ProjectConfig(
            spec=f"specs/{name}.md", base_branch=base, test_command=command, state_dir=state
        ),
        model=ModelConfig(
            provider="scripted", script=f"{state}/{SCRIPT}", strong="scripted", fast="scripted"
        ),
        loop=LoopConfig(max_iterations=1000, max_stalled_iterations=1000),
        act=ActConfig(task_retries=0, max_parallel_tasks=1),
        approval=ApprovalConfig(wait="suspend"),
        gate=GateConfig(),
        sandbox=SandboxConfig(mode="bwrap"),
        root=clone,
    )
    run = open_run(config, model=replay_model(commit, change))
    try:
        mark = run.db.execute("SELECT coalesce(max(id), 0) FROM events").fetchone()[0]
        report = run.step(lambda line: None)
        rows = run.db.execute(
            "SELECT kind, data_json FROM events WHERE id > ? AND kind IN ('act.gate', "
            "'act.merged') ORDER BY id",
            [mark],
        ).fetchall()
        pending = approvals.waiting(run.db)
        if pending is not None:  # the bench, as the person, declines it: the next replay acts
            approvals.settle(run.db, pending.id, False, "replay: held merge recorded, declined")
    finally:
        run.close("replayed")
    seconds = time.perf_counter() - started
    gates = [json.loads(data) for kind_, data in rows if kind_ == "act.gate"]
    if any(kind_ == "act.merged" for kind_, _ in rows):
        reason = gates[-1]["reason"] if gates else report.reason
        return Outcome(kind, "merged", reason, seconds=seconds, merged_commit=report.merged_commit)
    if not gates:
        why = f"{report.outcome}: {report.reason}"
        return Outcome(kind, "refused", why, refusal="no-gate", seconds=seconds)
    verdict = gates[-1]
    if verdict["approval"] and not verdict["targets"]:
        rules = sorted({hold_rule(item) for item in verdict["approval"]})
        return Outcome(kind, "held", verdict["reason"], rules, seconds=seconds)
    return Outcome(
        kind, "refused", verdict["reason"], refusal=refusal(verdict["reason"]), seconds=seconds
    )


# --- the model ------------------------------------------------------------------------

VERIFIED = {
    "checks": [],
    "task_updates": [],
    "learnings": [],
    "learning_verdicts": [],
    "summary": "checked",
}
NOT_MET = {"spec_satisfied": False, "confidence": "high", "gaps": [], "summary": "not yet"}


def replay_model(commit: Commit, change: Change) -> FunctionModel:
    """ORIENT answers at once, the planner plans the commit as one task, the
    executor writes `change` and submits."""
    task = {
        "id": "fix",
        "task_id": None,
        "title": commit.subject[:200],
        "description": commit.message[:4000],
        "depends_on": [],
        "risk": "low",
        "tool_hints": [],
        "target_tests": commit.targets,
    }
    plan = {"intent": f"replay {commit.short}", "approach": "the commit's diff", "tasks": [task]}
    planning = {
        "actionable_work_exists": True,
        "new_tasks": [],
        "stuck_reason": None,
        "learnings": [],
        "iteration_plan": plan,
    }

    def executor(request: ModelRequest) -> Reply:
        if not first_turn(request):
            return submit(
                {
                    "tasks_blocked": [],
                    "task_comments": [],
                    "new_subtasks": [],
                    "learnings": [],
                    "summary": commit.subject,
                }
            )
        calls = [
            {"name": "write_file", "input": {"path": path, "content": text}}
            if text is not None
            else {
                "name": "run_command",
                "input": {"command": f"rm -f -- {shlex.quote(path)}", "timeout_seconds": None},
            }
            for path, text in change.items()
        ]
        return {"tool_calls": calls}

    return FunctionModel.by_agent(
        {
            "verifier": lambda request: submit(VERIFIED),
            "assessor": lambda request: submit(NOT_MET),
            "planner": lambda request: submit(planning),
            "executor": executor,
        }
    )
