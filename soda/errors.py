"""The error tree: every failure soda expects, and what happens next for each.

    SodaError
    ├── UserError              a person must fix something; the CLI prints one line, exits 2
    │   ├── ConfigError        soda.toml is missing, malformed or names a missing file
    │   ├── InputError         a command argument or inbox file is malformed
    │   ├── NotAGitRepository  soda was pointed at a directory outside git
    │   ├── CredentialsError   the provider refused the API key (401/403)
    │   └── ContextTooSmall    an agent's first request does not fit the model's context
    │                          window (model.context_window), or the server cut it silently
    ├── BudgetExhausted        a [budget] limit was passed: the run stops as STUCK (exit 3)
    ├── Interrupted            a signal asked soda to stop; raised at the next safe point
    │                          (and by a command the stop killed: its result is no result)
    ├── TransientError         the world hiccupped (timeouts, 429, 5xx); retried with
    │                          backoff inside the provider, then surfaced: the iteration
    │                          ends, nothing is lost, the run can resume (exit 5)
    │   ├── ModelGaveUp        a model's ordinary failure (turn limit, max_tokens, no tool
    │   │                      call, prompt too long) outlasted the one second chance the
    │   │                      runtime gives it; an executor's ends its task as given up
    │   └── ProviderLimit      the provider's rate limit (HTTP 429 with the time it resets)
    │                          outlasts the retry budget: the agent waits it out with no
    │                          model call, then asks again (soda.agent.quota)
    └── StructuralError        the system itself is wrong; the loop HALTs and records why (exit 4)
        ├── ContractViolation  an agent's answer broke its JSON Schema contract twice in
        │                      one run (the first slip goes back to the model)
        ├── ModelStopped       the model refused, or wrote arguments that are not JSON
        │                      twice in one run (the first slip goes back to the model)
        ├── PromptTooLong      the provider refused a conversation longer than the model's
        │                      context (the runtime condenses and asks again, once)
        ├── MaxTokensTooLarge  the prompt fits but the prompt and max_tokens together do
        │                      not (vLLM); the runtime lowers max_tokens and asks again
        ├── ScriptError        the scripted provider ran out or was asked something unplanned
        ├── DatabaseTooNew     state/soda.db was written by a newer soda
        └── GitError           a git operation failed in a way soda cannot route around

Only the CLI (`soda.cli.app.handled`) and the daemon's top level turn these into
messages and exit codes. Everything else raises them, with `raise ... from exc`
when translating a foreign exception, so the original cause survives for the log.

Outside the tree, four exceptions are control flow inside one room, never seen
above it: `soda.tools.toolbox.Suspended` (a tool call waits for a person: the
agent run stops and keeps its conversation), `soda.tools.sandbox.ToolError` (a
tool call the model got wrong: its message goes back to the model),
`soda.human.parse.Rejection` (an inbox file is unusable: it moves to rejected/
with its reason) and `soda.llm.retry.RetryableError` (one failed attempt, a
TransientError consumed by the provider's retries).

May import: nothing of soda.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class SodaError(Exception):
    """Base of every error soda raises on purpose."""

    exit_code = 1


class UserError(SodaError):
    """Something a person must fix. Printed as one line; exit code 2."""

    exit_code = 2


class ConfigError(UserError):
    """soda.toml is missing or invalid. `problems` holds one line per issue."""

    def __init__(self, problems: list[str] | str) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


class InputError(UserError):
    """A command argument, a schema name or an inbox file is malformed."""


class NotAGitRepository(UserError):
    """soda needs a git repository and the directory is not inside one."""


class CredentialsError(UserError):
    """The model provider rejected the API key (401/403). Retrying cannot help."""


class ContextTooSmall(UserError):
    """An agent's first request cannot fit the model's context window: soda's
    estimate says so before sending, or the server refused it as too long, or the
    server counted far fewer prompt tokens than were sent (it cut the prompt
    silently, as Ollama does past its num_ctx). Nothing is left to condense on a
    first request and retrying sends the same one, so a person must give the model
    a larger window (and say so in model.context_window). Exit code 2."""


class BudgetExhausted(SodaError):
    """A limit a person set in [budget] was passed. Not a failure of the system:
    the loop stops as STUCK with this message as the reason. Exit code 3."""

    exit_code = 3


class Interrupted(SodaError):
    """SIGTERM/SIGINT asked soda to stop: raised between tool calls (a safe point),
    and by `soda.system.proc.run` for a command the stop killed (a killed test run
    is no evidence), so the iteration is recorded as interrupted and its worktree
    removed. Exit 0."""

    exit_code = 0


class TransientError(SodaError):
    """A failure that may pass by itself. Providers retry these within a budget;
    one that escapes the provider has outlasted that budget. Exit code 5."""

    exit_code = 5


class ModelGaveUp(TransientError):
    """An agent's model failed in an ordinary way twice: it was handed the failure
    once (a last forced turn, a higher max_tokens, a reminder to call a tool, a
    condensed history) and failed again. Not structural, so no HALT: an executor's
    task ends as given up, any other agent's iteration ends like a transient failure
    and a later one tries again. `reason` is turn_limit, max_tokens, no_tool_call or
    prompt_too_long."""

    def __init__(self, reason: str, message: str, raw: Any = None) -> None:
        self.reason = reason
        self.raw = raw
        super().__init__(message)


class ProviderLimit(TransientError):
    """The provider refused a call for a rate limit (HTTP 429, or a coding CLI's own
    structural report of one) that resets later than the retry budget reaches, and
    said when (`seconds` from the answer). The agent runner waits it out, making no
    model call, honouring a stop and [budget] max_wall_seconds, then asks again; a
    caller that cannot wait sees a transient failure. Only a provider's answer
    raises it: text in a tool's output or a file never does."""

    def __init__(self, message: str, seconds: float) -> None:
        self.seconds = seconds
        super().__init__(message)


class StructuralError(SodaError):
    """The system is wrong, not the weather: never retried, the loop HALTs.
    Exit code 4."""

    exit_code = 4


@dataclass(frozen=True)
class Violation:
    """Where a document broke its contract: JSON path, the failing rule, the value."""

    contract: str
    path: str
    rule: str
    message: str
    value: Any = None

    def __str__(self) -> str:
        return f"{self.contract} contract violated at {self.path} ({self.rule}): {self.message}"


class ContractViolation(StructuralError):
    """An agent's structured answer failed validation a second time in one run (the
    first violation goes back to the model with its path and rule). Carries the
    raw output so the halt record shows exactly what the model said."""

    def __init__(self, violation: Violation, raw: Any = None, agent: str | None = None) -> None:
        self.violation = violation
        self.raw = raw
        self.agent = agent
        prefix = f"agent {agent}: " if agent else ""
        super().__init__(prefix + str(violation))


class ModelStopped(StructuralError):
    """The model stopped without a usable answer: a refusal, or tool arguments (the
    structured answer included) that are not JSON a second time in one agent run
    (the first time goes back to the model). Running out of turns or tokens is
    ordinary: see ModelGaveUp."""

    def __init__(self, reason: str, message: str, raw: Any = None) -> None:
        self.reason = reason
        self.raw = raw
        super().__init__(message)


class PromptTooLong(StructuralError):
    """The provider refused the request because the conversation exceeds the model's
    context window. The runtime condenses older tool results and asks once more;
    only a caller without that recourse sees this as structural."""


class MaxTokensTooLarge(StructuralError):
    """The server refused a request whose prompt fits its context window but whose
    prompt and max_tokens together do not (vLLM counts max_tokens inside the
    window: "you requested N tokens ... M in the completion"). Not a prompt too
    long: the runtime lowers max_tokens to the room left and asks again; only a
    caller without that recourse sees this as structural."""

    def __init__(self, message: str, room: int | None = None) -> None:
        self.room = room
        """Tokens the server says are left for the answer, when it says."""
        super().__init__(message)


class ScriptError(StructuralError):
    """The scripted provider cannot answer: the script ran out or does not fit."""


class DatabaseTooNew(StructuralError):
    """The state database has migrations this version of soda does not know."""


class GitError(StructuralError):
    """A git operation failed unexpectedly."""
