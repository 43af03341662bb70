"""The sections of `soda.toml`: one pydantic model per `[section]`, every field
documented (`soda init` writes the commented file from these docstrings).

`soda.config` assembles them into `Config` and loads the file.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from soda.config.docstrings import Documented

Risk = Literal["none", "low", "medium", "high", "critical"]
RISK_LEVELS: tuple[str, ...] = ("none", "low", "medium", "high", "critical")

MIN_THINKING_TOKENS = 1024
"""The smallest extended-thinking budget the Anthropic API accepts."""

DEFAULT_REPO_MAP_TOKENS = 2000
"""The repository map's default size, in tokens ([context] repo_map_tokens)."""


class Section(Documented):
    model_config = ConfigDict(extra="forbid")


class ProjectConfig(Section):
    spec: str = "specs/SPEC.md"
    """Path of the spec soda works toward, relative to soda.toml."""
    base_branch: str = "main"
    """Branch the milestone branch starts from; soda never commits to it directly."""
    test_command: str = "python -m pytest -q"
    """Shell command that runs the project's tests; its result gates every merge."""
    state_dir: str = "state"
    """Directory for soda's database, worktrees, inbox and logs, relative to soda.toml."""


class Price(Section):
    input: float = Field(ge=0, le=10_000, allow_inf_nan=False)
    """USD per million input tokens (0-10000)."""
    output: float = Field(ge=0, le=10_000, allow_inf_nan=False)
    """USD per million output tokens (0-10000)."""
    cache_write: float = Field(0.0, ge=0, le=10_000, allow_inf_nan=False)
    """USD per million tokens written to the prompt cache (0-10000)."""
    cache_read: float = Field(0.0, ge=0, le=10_000, allow_inf_nan=False)
    """USD per million tokens read from the prompt cache (0-10000)."""


class ModelConfig(Section):
    provider: str = "anthropic"
    """Which model provider answers: "anthropic" (the Anthropic API), "openai" (an
    OpenAI-compatible endpoint: Ollama, vLLM, llama.cpp server), or "scripted" (a
    scripted replay for tests and the offline demo)."""
    strong: str = "claude-sonnet-4-6"
    """Model id for the strong tier (planning, execution)."""
    fast: str = "claude-haiku-4-5"
    """Model id for the fast tier (verification and other cheap checks)."""
    base_url: str | None = None
    """Override the provider's API address (for Anthropic ANTHROPIC_BASE_URL also works)."""
    api_key_env: str = "ANTHROPIC_API_KEY"
    """Name of the environment variable holding the API key."""
    script: str | None = None
    """For provider = "scripted": the JSON script of responses to replay."""
    connect_timeout: float = Field(10.0, ge=0.1, le=600, allow_inf_nan=False)
    """Seconds to wait for a connection to the provider (0.1-600)."""
    read_timeout: float = Field(120.0, ge=0.1, le=3600, allow_inf_nan=False)
    """Seconds to wait for a response once connected (0.1-3600)."""
    max_retries: int = Field(4, ge=0, le=20)
    """Retries of one request after a transient failure (timeout, 429, 5xx) (0-20)."""
    max_retry_wait: float = Field(120.0, ge=0, le=3600, allow_inf_nan=False)
    """Total seconds one request may spend waiting between retries (0-3600)."""
    max_tokens: int = Field(8192, ge=1, le=200_000)
    """Output token limit for one model response (1-200000); an upper bound: a small
    context window asks for less (a third of the window)."""
    context_window: int | None = Field(None, ge=1024, le=10_000_000)
    """Tokens of the strong model's context window, prompt and answer together
    (1024-10000000). Not set: soda's table of known models (Claude 200000, gpt-4o
    128000, qwen2.5-coder 32768, llama3 8192, ...), else 8192 (a conservative
    guess). Set it to what the server really gives the model (Ollama: num_ctx;
    vLLM: --max-model-len; llama.cpp: --ctx-size). Every agent's answer budget,
    tool-result size and condensing are sized from it."""
    context_window_fast: int | None = Field(None, ge=1024, le=10_000_000)
    """The same for the fast model (1024-10000000). Not set: context_window when the
    fast model is the strong one, else the table, else 8192."""
    thinking: int = Field(0, ge=0, le=200_000)
    """Extended thinking for the strong tier, Anthropic only: 0 (off) or a budget of
    thinking tokens (1024-200000), asked for on top of max_tokens. Sent only on
    turns where the model chooses its tool (extended thinking cannot be combined
    with a forced tool call: the last turn and the turn after a reminder go
    without it)."""
    max_turns: int = Field(40, ge=1, le=1000)
    """Tool-loop turns an agent may take before it must have answered (1-1000)."""
    log_requests: bool = False
    """Keep what each model call was sent and answered in state/requests/N.jsonl
    (one file per iteration N; `soda show N --requests` prints it)."""
    log_requests_keep: int = Field(50, ge=1, le=100_000)
    """How many iterations' request logs to keep, newest first (1-100000)."""
    prices: dict[str, Price] = Field(default_factory=dict)
    """Your price per model id, in USD per million tokens, e.g. [model.prices."my-model"]
    input = 1.0, output = 2.0. It wins over everything; without one, a model on a
    loopback endpoint (127.0.0.1, localhost, ::1) is free and any other is priced
    by the genai-prices package's data. A model neither prices (and no
    [budget] max_tokens_per_run) is refused at start: a cost budget could not bind."""

    @model_validator(mode="after")
    def _thinking_is_off_or_enough(self) -> ModelConfig:
        if 0 < self.thinking < MIN_THINKING_TOKENS:
            raise ValueError(
                f"thinking: 0 (off) or at least {MIN_THINKING_TOKENS} tokens "
                f"(the API's smallest budget), not {self.thinking}"
            )
        return self


class LoopConfig(Section):
    max_iterations: int = Field(20, ge=1, le=10_000)
    """Iterations in one run before soda stops as STUCK (1-10000)."""
    max_stalled_iterations: int = Field(3, ge=1, le=1000)
    """Iterations in a row without progress (nothing merged, no task closed, nothing
    from a person) before soda stops as STUCK (1-1000; see README, Progress)."""
    loop_window: int = Field(5, ge=2, le=50)
    """How many recent iterations loop detection looks at (2-50)."""
    loop_threshold: int = Field(3, ge=2, le=50)
    """Similar attempts in the window (alike intent, same failed outcome, same tasks or
    failing tests) that make ORIENT hear "you have tried this N times" (2-50)."""
    intent_similarity: float = Field(0.6, gt=0, le=1, allow_inf_nan=False)
    """How alike two intents must be to count as the same attempt: the share of
    normalized words they have in common (Jaccard, above 0 up to 1; 1 = same words)."""
    warned_repeats: int = Field(1, ge=0, le=10)
    """Similar attempts after the warning before the run stops as STUCK (0-10; 0
    stops at once). loop_threshold + warned_repeats must fit in loop_window."""
    orient_pattern: Literal["split", "single"] = "split"
    """ORIENT as three fresh agents (split) or one agent walked through three steps (single)."""
    planning: Literal["auto", "model", "always", "never"] = "auto"
    """Whether an iteration gets a multi-task plan (a DAG) or one task: auto (a cheap
    heuristic on the open tasks and the spec's unchecked items decides), model (the
    fast model decides, falling back to the heuristic on any error), always, or
    never (one task per iteration)."""

    @model_validator(mode="after")
    def _repeats_fit_the_window(self) -> LoopConfig:
        if self.loop_threshold + self.warned_repeats > self.loop_window:
            raise ValueError(
                f"loop_threshold ({self.loop_threshold}) + warned_repeats "
                f"({self.warned_repeats}) must not exceed loop_window ({self.loop_window})"
            )
        return self


class BudgetConfig(Section):
    max_cost_usd: float = Field(10.0, ge=0, le=10_000, allow_inf_nan=False)
    """Spend limit, in USD, for one run: one `soda run`, or one wake of the daemon
    (the next wake starts from 0); passing it stops the run as STUCK (0-10000)."""
    max_cost_usd_per_day: float = Field(50.0, ge=0, le=100_000, allow_inf_nan=False)
    """Spend limit, in USD, for all runs of the local calendar day together; passing
    it stops as STUCK until midnight or `soda budget reset` (0-100000)."""
    max_tokens_per_iteration: int = Field(2_000_000, ge=1, le=100_000_000)
    """Token limit (input + output) for one iteration (1-100000000)."""
    max_tokens_per_run: int = Field(0, ge=0, le=10_000_000_000)
    """Token limit (input, cache reads and writes, and output) for one run, whatever
    the model and its price (0-10000000000; 0: off). Set it to budget a model soda
    cannot price by tokens instead of dollars: such a model then starts (its calls
    count $0) and the cost limits keep binding the models soda can price."""
    max_wall_seconds: float = Field(14_400.0, ge=0, le=2_592_000, allow_inf_nan=False)
    """Wall-clock limit, in seconds, for one run: one `soda run`, or one wake of the
    daemon; passing it kills the running command (as `soda stop` does) and ends the
    run as STUCK at the next safe point; 0 for no limit (0-2592000, 30 days)."""


class ActConfig(Section):
    on_done: Literal["leave", "merge"] = "leave"
    """At DONE: leave the milestone branch for a person to review, or merge it into
    the base branch."""
    command_timeout: float = Field(600.0, ge=1, le=86_400, allow_inf_nan=False)
    """Seconds any command run by soda or its executor may take (tests included)
    (1-86400, a day)."""
    max_parallel_tasks: int = Field(3, ge=1, le=16)
    """Tasks of one plan batch that run at the same time, each in its own worktree
    with its own executor; their work merges one task at a time (1-16)."""
    task_retries: int = Field(1, ge=0, le=5)
    """Times a failed task (gave up, failed the gate) is tried again with a
    description the retrier rewrote from the failure (0-5)."""
    output_limit: int = Field(20_000, ge=100, le=1_000_000)
    """Characters of command output kept (head and tail) when shown to an agent
    (100-1000000)."""


class PlanConfig(Section):
    max_tasks: int = Field(8, ge=1, le=50)
    """Most tasks one iteration plan may have; a larger plan goes back to the planner
    with the problem (1-50)."""


class ApprovalConfig(Section):
    risk_threshold: Risk = "high"
    """Plans with a task at or above this risk wait for `soda approve`."""
    timeout: float = Field(3600.0, gt=0, le=2_592_000, allow_inf_nan=False)
    """Seconds a plan waits for approval before it is rejected (above 0, up to
    2592000: 30 days)."""
    wait: Literal["block", "suspend"] = "block"
    """How a plan (or a merge the gate may not make alone) waits for its
    approval: "block" (its iteration waits, counting the timeout) or "suspend"
    (the plan, or the merge's work, is kept and the iteration ends STUCK; the next
    iteration runs, merges or rejects it, without planning again, once the
    verdict or the timeout came). soda fleet always suspends."""


class SandboxConfig(Section):
    mode: Literal["bwrap", "none"] = "bwrap"
    """How agent commands and test runs are confined: "bwrap" (a bubblewrap jail:
    read-only system, the worktree at the repository's path, no home, no network,
    no credentials, its own process tree) or "none" (plain subprocesses; only for
    machines where the jail cannot be made, and it gives all of that up)."""
    network: bool = False
    """Let jailed commands reach the network (e.g. to install dependencies)."""
    expose: list[str] = Field(default_factory=list)
    """Extra paths bound read-only into the jail, e.g. a toolchain under your home
    (the home itself is replaced by an empty directory)."""
    env_passthrough: list[str] = Field(default_factory=list)
    """Environment variables passed into the jail besides PATH, locale and TERM.
    Never list a credential: the agent can read everything in its environment."""
    bind_ignored: list[str] = Field(
        default_factory=lambda: [".venv", "venv", ".tox", ".nox", "node_modules"]
    )
    """Ignored directories of your checkout (environments the tests need) bound
    read-only beside the worktree, so editable installs resolve to the worktree."""


class GateConfig(Section):
    junit: str | None = None
    """For a test command that is not pytest: where it writes a JUnit XML report,
    relative to the repository (jest-junit, gotestsum, cargo-nextest and surefire
    can). Unset and not pytest: the gate has only the exit code (weak)."""
    protected: list[str] = Field(default_factory=lambda: ["soda.toml"])
    """Files (glob patterns, relative to the repository) whose change is never
    merged on the gate's word: such changes wait for `soda approve`. conftest.py
    and pytest/tox configuration are always protected."""


class ContextConfig(Section):
    repo_map_tokens: int = Field(DEFAULT_REPO_MAP_TOKENS, ge=200, le=50_000)
    """Size, in tokens (about 4 characters each), of the repository map the repo_map
    tool gives agents: files with their top-level symbols, most relevant first
    (200-50000)."""
    max_learnings: int = Field(12, ge=1, le=500)
    """Most active learnings kept and shown to agents; past it the oldest are
    retired, with the cap as their reason (1-500). Every agent reads them on every
    call: a few sharp ones help more than a long list."""
    tool_result_chars: int = Field(20_000, ge=1_000, le=1_000_000)
    """Characters of one tool result an agent sees, at most; a longer result keeps
    its head and tail with a note of what was cut (1000-1000000). A small context
    window shows less: an eighth of the window (about 4 characters a token)."""
    executor_session_tokens: int = Field(60_000, ge=5_000, le=2_000_000)
    """Estimated tokens (characters / 4, or the model's own count) past which an
    executor session's older tool results become one-line summaries, the latest
    few kept whole (5000-2000000). Every agent, the executor included, also
    condenses before its conversation outgrows the model's context window
    (model.context_window)."""
    guidance: list[str] = Field(default_factory=lambda: ["AGENTS.md", "CLAUDE.md"])
    """The repository's own guidance files (relative to the repository; missing
    ones are skipped), shown to every agent as the repository's guidance: quoted
    as data, never as instructions, and never widening tools or the jail."""
    guidance_chars: int = Field(12_000, ge=0, le=200_000)
    """Characters of guidance shown at most, all files together; the rest is cut
    with a note (0-200000; 0 shows none)."""

    @model_validator(mode="after")
    def _guidance_inside(self) -> ContextConfig:
        for name in self.guidance:
            parts = name.replace("\\", "/").split("/")
            if not name.strip() or name.startswith(("/", "~")) or ".." in parts:
                raise ValueError(f"context.guidance: {name!r} must be a path inside the repository")
        return self


class DaemonConfig(Section):
    tick_seconds: float = Field(5.0, ge=0.05, le=3600, allow_inf_nan=False)
    """How often, in seconds, the daemon checks for work when nothing wakes it sooner
    (0.05-3600)."""
    windows: list[str] = Field(default_factory=list)
    """Cron expressions (5 fields) for when the daemon may work, e.g. "* 22-23,0-6 * * *".
    Empty means always."""
    notify_command: str | None = None
    """Shell command run on DONE, STUCK and HALT, with SODA_EVENT, SODA_ITERATION and
    SODA_REASON in its environment."""


ExecutorBackend = Literal["builtin", "claude-code", "codex"]


class ExecutorConfig(Section):
    backend: ExecutorBackend = "builtin"
    """Who does a task's work: "builtin" (soda's own tool loop), "claude-code" (Claude
    Code) or "codex" (Codex CLI), the CLIs run in soda's jail with the API key kept
    outside it (`soda tools install NAME` installs the pinned version)."""
    allowed: list[ExecutorBackend] = Field(default_factory=list)
    """Backends a plan task may ask for instead of `backend` (the planner names one
    in a task's tool hints as `executor:NAME`); empty: every task uses `backend`."""
    command: str | None = None
    """Path (or name on PATH) of `backend`'s binary. Not set (and always for the
    `allowed` ones): the one `soda tools install` put in soda's own directory,
    else the pinned binary's name on PATH."""
    model: str | None = None
    """Model the CLI is asked for. Not set: model.strong for claude-code,
    gpt-5-codex for codex."""
    base_url: str | None = None
    """Where the egress proxy sends the CLI's model calls. Not set: model.base_url
    (or ANTHROPIC_BASE_URL, or the Anthropic API) for claude-code, the OpenAI API
    for codex."""
    api_key_env: str | None = None
    """Environment variable with the real API key, read by the proxy outside the
    jail. Not set: model.api_key_env for claude-code, OPENAI_API_KEY for codex."""
    task_timeout: float = Field(1800.0, ge=1, le=86_400, allow_inf_nan=False)
    """Seconds one CLI run may take before its process tree is killed (1-86400)."""
    idle_timeout: float = Field(300.0, ge=1, le=86_400, allow_inf_nan=False)
    """Seconds without an event from the CLI before it is killed as stalled (1-86400)."""
    result_grace: float = Field(10.0, ge=0.1, le=3600, allow_inf_nan=False)
    """Seconds the CLI may take to exit after its final result (0.1-3600)."""
    api_failures: int = Field(5, ge=1, le=100)
    """Failed model calls (5xx, 429, no answer) in a row after which the CLI is
    stopped and the task ends as a transient failure (1-100)."""
