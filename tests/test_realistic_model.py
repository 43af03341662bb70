"""The demo, driven to DONE by a model that behaves like a real one.

The behavioural fake answers from each request the way a real model does and
soda's script never did: it thinks aloud before its calls, leaves out optional
arguments, slips on a schema once (a risk of "moderate"), batches an edit with
its final answer in one turn, and sits behind a small context window that
refuses (a 400, as `PromptTooLong`) any request that does not fit. The project,
git, the jail, the gate and the database are all real.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from soda.errors import PromptTooLong
from soda.llm.base import ModelRequest, ModelResponse
from soda.llm.function import FunctionModel, Reply, last_results
from soda.loop.run import Ending, run_loop
from tests.conftest import git
from tests.plan_fakes import events, new_project, open_session, set_key

WINDOW = 12_000
"""The model's context window, in tokens (set as model.context_window too)."""

OLD = '''def add(a: float, b: float) -> float:
    """Sum of a and b."""
    return a + b
'''
NEW = (
    OLD
    + '''

def subtract(a: float, b: float) -> float:
    """Difference of a and b."""
    return a - b


def divide(a: float, b: float) -> float:
    """a divided by b; dividing by zero is a clear error."""
    if b == 0:
        raise ValueError("cannot divide by zero")
    return a / b
'''
)
TASK = {
    "id": "a",
    "task_id": None,
    "title": "Add subtract and divide to calc",
    "description": "subtract(a, b) and divide(a, b), with a ValueError on division by zero",
    "depends_on": [],
    "risk": "low",
    "tool_hints": [],
}


def turns(request: ModelRequest) -> int:
    """How many turns of this agent run came before this request."""
    return sum(1 for message in request.messages if message.role == "assistant")


def say(text: str, *calls: dict[str, Any]) -> dict[str, Any]:
    return {"text": text, "tool_calls": list(calls)}


def tool(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "input": arguments}


class RealisticModel:
    """The demo's agents, answered from what each request shows."""

    def __init__(self, window: int = WINDOW) -> None:
        self.window = window
        self.slipped = False
        self.largest = 0
        self.refused = 0
        self.sizes: list[tuple[ModelRequest, int]] = []
        """Every request, with its size and its answer's share, as the server counts."""
        self._lock = threading.Lock()
        self._inner = FunctionModel.by_agent(
            {
                "verifier": self.verifier,
                "assessor": self.assessor,
                "planner": self.planner,
                "executor": self.executor,
            }
        )

    provider = "function"

    def complete(self, request: ModelRequest) -> ModelResponse:
        size = self._tokens(request) + request.max_tokens
        with self._lock:
            self.sizes.append((request, size))
            self.largest = max(self.largest, size)
            if size > self.window:
                self.refused += 1
                raise PromptTooLong(f"prompt is too long: {size} tokens > {self.window} maximum")
        return self._inner.complete(request)

    @staticmethod
    def _tokens(request: ModelRequest) -> int:
        """What the server counts: every character of the prompt, 4 to a token."""
        messages = json.dumps([str(m) for m in request.messages])
        tools = json.dumps([[t.name, t.description, t.input_schema] for t in request.tools])
        return (len(request.system) + len(messages) + len(tools)) // 4

    # --- ORIENT -------------------------------------------------------------------

    def verifier(self, request: ModelRequest) -> Reply:
        if turns(request) == 0:
            return say("Let me see what calc.py has today.", tool("read_file", path="calc.py"))
        return say(
            "calc.py has add() only; the claims hold.",
            tool(
                "submit",
                checks=[],
                task_updates=[],
                learnings=[],
                learning_verdicts=[],
                summary="calc.py has add(); subtract and divide are missing",
            ),
        )

    def assessor(self, request: ModelRequest) -> Reply:
        if turns(request) == 0:
            return say("I'll check calc.py against the spec.", tool("read_file", path="calc.py"))
        met = any("def divide" in text for text in last_results(request))
        gaps = [] if met else [{"description": "subtract and divide", "severity": "blocking"}]
        return say(
            "Comparing with the acceptance criteria.",
            tool(
                "submit",
                spec_satisfied=met,
                confidence="high",
                gaps=gaps,
                summary="all criteria met" if met else "subtract and divide are missing",
            ),
        )

    def planner(self, request: ModelRequest) -> Reply:
        risk = "low"
        with self._lock:
            if not self.slipped:  # the one schema slip: an enum value the contract lacks
                self.slipped, risk = True, "moderate"
        plan = {
            "intent": "Add subtract and divide",
            "approach": "test first, then the two functions",
            "tasks": [{**TASK, "risk": risk}],
        }
        return say(
            "One small task covers it.",
            tool(
                "submit",
                actionable_work_exists=True,
                new_tasks=[],
                iteration_plan=plan,
                stuck_reason=None,
                learnings=[],
            ),
        )

    # --- ACT ------------------------------------------------------------------------

    def executor(self, request: ModelRequest) -> Reply:
        step = turns(request)
        if step == 0:
            return say(
                "Test first: the acceptance tests should fail now.",
                tool("run_tests", selector="tests/test_acceptance.py"),
            )
        if step == 1:
            return say("They fail as expected. Reading calc.py.", tool("read_file", path="calc.py"))
        done = tool(
            "submit",
            tasks_blocked=[],
            task_comments=[],
            new_subtasks=[],
            learnings=[],
            summary="added subtract and divide",
        )
        return say(
            "Adding both functions, then I'm done.",
            tool("edit_file", path="calc.py", old=OLD, new=NEW),
            done,
        )


def test_a_real_model_s_habits_still_reach_done(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    set_key(root, "context_window", str(WINDOW))
    model = RealisticModel()
    session = open_session(root, model)  # type: ignore[arg-type]
    result = run_loop(session, lambda line: None)

    assert result.ending is Ending.DONE, result.reason
    milestone = session.milestone.branch
    calc = git(root, "show", f"{milestone}:calc.py")
    assert "def divide" in calc and "cannot divide by zero" in calc  # the batched edit landed
    slips = [e for e in events(session, "agent.soft_failure") if e["agent"] == "planner"]
    assert [e["failure"] for e in slips] == ["contract_violation"]  # one slip, one second chance
    assert model.refused == 0 and model.largest <= WINDOW  # every request fit the window
