"""The offline stand-in for a model: a behavioural `FunctionModel` per task.

It knows the task's change (`solution/`, or `wrong/`) and drives the real loop
with it: the assessor reads the changed files through `read_file` on the
milestone tip and calls the spec met once the change is there; the planner
plans one task; the executor writes the change through `write_file` and
`edit_file`, runs the tests with `run_command` (in the jail), and submits. So
every part of the harness a real model goes through (the loop, the gate, the
merge, DONE's test run, the acceptance step) is exercised without a network.

Behaviours: `solve` writes the known solution; `wrong` writes the plausible
wrong change and still calls the spec met (the acceptance tests must catch it);
`stall` starts a command that never ends (the wall-clock timeout must catch it).

Each reply carries a token estimate (characters / 4) so the report's token
columns are exercised too; the fake's model ids have no price, so cost is 0.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from collections.abc import Callable
from typing import Any

from bench.effectiveness.suite import Change, Task
from soda.llm.base import ModelRequest, ToolCall
from soda.llm.function import FunctionModel, Reply, first_turn, submit

BEHAVIOURS = ("solve", "wrong", "stall")
FAKE_MODEL_ID = "fake"
"""The model id the fake runs under: not in any price table, so it costs 0."""
STALL_COMMAND = '{python} -c "import time; time.sleep(3600)"'
_LINE_NUMBER = re.compile(r"^\s*\d+\t")
"""read_file shows each line as `{number:>6}<TAB>{text}`."""


def tool_call(request: ModelRequest, name: str, **arguments: Any) -> dict[str, Any]:
    """One call of tool `name`. Arguments the tool's schema marks nullable and the
    caller left out are sent as null, so a tool that gains an optional parameter
    does not break the fake."""
    spec = next((tool for tool in request.tools if tool.name == name), None)
    if spec is not None:
        for key, schema in spec.input_schema.get("properties", {}).items():
            if key not in arguments and _nullable(schema):
                arguments[key] = None
    return {"name": name, "input": arguments}


def _nullable(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return any(_nullable(option) for option in schema.get("anyOf", []))


def estimated(request: ModelRequest, reply: dict[str, Any]) -> dict[str, Any]:
    """`reply` with usage estimated from the characters in and out (4 per token)."""
    chars = len(request.system) + sum(
        len(m.text)
        + sum(len(json.dumps(c.input)) for c in m.tool_calls)
        + sum(len(r.content) for r in m.tool_results)
        for m in request.messages
    )
    out = len(json.dumps(reply.get("tool_calls", []))) + len(reply.get("text", ""))
    return {**reply, "usage": {"input_tokens": chars // 4 + 1, "output_tokens": out // 4 + 1}}


def shown_text(result: str) -> str:
    """A read_file result as the file's text (line numbers and notes removed)."""
    lines = [line for line in result.splitlines() if not line.startswith("[showing lines")]
    return "\n".join(_LINE_NUMBER.sub("", line, count=1).rstrip() for line in lines)


def _normal(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def applied(change: Change, files: dict[str, str]) -> bool:
    """Whether `files` (path -> text as read) hold the change: each written file
    whole, and each edit's new text."""
    if any(path not in files for path in change.paths):
        return False
    if any(_normal(files[path]) != _normal(text) for path, text in change.writes.items()):
        return False
    return all(_normal(edit.new) in _normal(files[edit.path]) for edit in change.edits)


def files_read(request: ModelRequest) -> dict[str, str]:
    """The files this agent read with success, by path, from the conversation."""
    calls: dict[str, ToolCall] = {
        call.id: call for message in request.messages for call in message.tool_calls
    }
    found: dict[str, str] = {}
    for message in request.messages:
        for result in message.tool_results:
            call = calls.get(result.call_id)
            if call is not None and call.name == "read_file" and not result.is_error:
                found[call.input["path"]] = shown_text(result.content)
    return found


def _turns(request: ModelRequest) -> int:
    """How many tool-calling turns this agent has taken so far."""
    return sum(1 for message in request.messages if message.tool_calls)


class TaskFake:
    """The answers of every agent for one task and behaviour."""

    def __init__(self, task: Task, behaviour: str) -> None:
        if behaviour not in BEHAVIOURS:
            raise ValueError(f"unknown fake behaviour {behaviour!r} ({', '.join(BEHAVIOURS)})")
        self.task = task
        self.behaviour = behaviour
        self.change = task.change("wrong" if behaviour == "wrong" else "solution")
        if not self.change.paths:
            kind = "wrong" if behaviour == "wrong" else "solution"
            raise ValueError(f"task {task.name} has no {kind}/ change for the fake to write")

    def model(self) -> FunctionModel:
        answers: dict[str, Callable[[ModelRequest], Reply]] = {
            "verifier": self.verifier,
            "assessor": self.assessor,
            "planner": self.planner,
            "orienter": self.orienter,
            "executor": self.executor,
            "retrier": self.retrier,
            "planning_mode": self.planning_mode,
        }
        by_agent = FunctionModel.by_agent(answers)
        return FunctionModel(
            lambda request: estimated(request, _as_dict(by_agent.answer(request))),
            name=f"fake-{self.behaviour}-{self.task.name}",
        )

    # --- ORIENT -----------------------------------------------------------------

    def _read_changed(self, request: ModelRequest) -> Reply | None:
        """On the first turn, read every file the change touches (None after)."""
        if not first_turn(request):
            return None
        calls = [tool_call(request, "read_file", path=path) for path in self.change.paths]
        return {"text": "Reading the files the spec is about.", "tool_calls": calls}

    def _met(self, request: ModelRequest) -> bool:
        return applied(self.change, files_read(request))

    def verifier(self, request: ModelRequest) -> Reply:
        return submit(
            {
                "checks": [],
                "task_updates": [],
                "learnings": [],
                "learning_verdicts": [],
                "summary": "claims checked",
            }
        )

    def assessor(self, request: ModelRequest) -> Reply:
        reading = self._read_changed(request)
        if reading is not None:
            return reading
        met = self._met(request)
        return submit(
            {
                "spec_satisfied": met,
                "confidence": "high",
                "gaps": [] if met else [{"description": self.task.title, "severity": "blocking"}],
                "summary": "the change is in place" if met else "the change is not made yet",
            }
        )

    def plan(self) -> dict[str, Any]:
        return {
            "intent": self.task.title,
            "approach": "make the change the spec asks for and run the tests",
            "tasks": [
                {
                    "id": "a",
                    "task_id": None,
                    "title": self.task.title,
                    "description": f"{self.task.title}, as the spec says; done when the "
                    "test suite passes.",
                    "depends_on": [],
                    "risk": "low",
                    "tool_hints": [],
                }
            ],
        }

    def planner(self, request: ModelRequest) -> Reply:
        return submit(
            {
                "actionable_work_exists": True,
                "new_tasks": [],
                "iteration_plan": self.plan(),
                "stuck_reason": None,
                "learnings": [],
            }
        )

    def orienter(self, request: ModelRequest) -> Reply:
        """All of ORIENT in one agent (`loop.orient_pattern = "single"`)."""
        reading = self._read_changed(request)
        if reading is not None:
            return reading
        met = self._met(request)
        return submit(
            {
                "spec_satisfied": met,
                "actionable_work_exists": not met,
                "confidence": "high",
                "summary": "the change is in place" if met else "the change is not made yet",
                "task_updates": [],
                "new_tasks": [],
                "gaps": [] if met else [{"description": self.task.title, "severity": "blocking"}],
                "iteration_plan": None if met else self.plan(),
                "stuck_reason": None,
                "learnings": [],
                "learning_verdicts": [],
            }
        )

    def planning_mode(self, request: ModelRequest) -> Reply:
        return submit({"multi_task": False, "reason": "one focused change"})

    # --- ACT --------------------------------------------------------------------

    def executor(self, request: ModelRequest) -> Reply:
        """Write the change, run the tests, submit: one step per turn."""
        steps: list[Callable[[ModelRequest], Reply]] = [self._write, self._test, self._done]
        if self.behaviour == "stall":
            steps = [self._stall, self._done]
        return steps[min(_turns(request), len(steps) - 1)](request)

    def _write(self, request: ModelRequest) -> Reply:
        writes = [
            tool_call(request, "write_file", path=path, content=content)
            for path, content in self.change.writes.items()
        ]
        edits = [
            tool_call(request, "edit_file", path=edit.path, old=edit.old, new=edit.new)
            for edit in self.change.edits
        ]
        return {"text": "Making the change.", "tool_calls": writes + edits}

    def _test(self, request: ModelRequest) -> Reply:
        return {"tool_calls": [tool_call(request, "run_command", command=self.task.command())]}

    def _stall(self, request: ModelRequest) -> Reply:
        command = STALL_COMMAND.format(python=shlex.quote(sys.executable))
        return {"tool_calls": [tool_call(request, "run_command", command=command)]}

    def _done(self, request: ModelRequest) -> Reply:
        return submit(
            {
                "tasks_blocked": [],
                "task_comments": [],
                "new_subtasks": [],
                "learnings": [],
                "summary": f"{self.task.title} (fake: {self.behaviour})",
            }
        )

    def retrier(self, request: ModelRequest) -> Reply:
        return submit(
            {"description": f"{self.task.title}, as the spec says.", "reason": "try again"}
        )


def _as_dict(reply: Reply) -> dict[str, Any]:
    if isinstance(reply, dict):
        return reply
    raise TypeError("the benchmark fake answers in the scripted entry format")


def fake_model(task: Task, behaviour: str = "solve") -> FunctionModel:
    """The fake for `task`: see the module docstring for the behaviours."""
    return TaskFake(task, behaviour).model()
