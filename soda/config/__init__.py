"""`soda.toml` loaded: the section models (`soda.config.sections`) assembled into `Config`.

A config is loaded from a file, validated strictly (unknown keys are errors, so a
misspelling never silently falls back to a default) and resolved against the
directory that holds it. Problems are reported one line each, naming the key and
the line it sits on.

May import: errors.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from pydantic import Field, ValidationError
from pydantic_core import ErrorDetails

from soda.config.forge import ForgeConfig, TrackerConfig
from soda.config.mcp import McpConfig, McpServer
from soda.config.sections import (
    DEFAULT_REPO_MAP_TOKENS,
    RISK_LEVELS,
    ActConfig,
    ApprovalConfig,
    BudgetConfig,
    ContextConfig,
    DaemonConfig,
    ExecutorConfig,
    GateConfig,
    LoopConfig,
    ModelConfig,
    PlanConfig,
    Price,
    ProjectConfig,
    Risk,
    SandboxConfig,
    Section,
)
from soda.errors import ConfigError

CONFIG_NAME = "soda.toml"

__all__ = [
    "CONFIG_NAME",
    "DEFAULT_REPO_MAP_TOKENS",
    "RISK_LEVELS",
    "ActConfig",
    "ApprovalConfig",
    "BudgetConfig",
    "Config",
    "ContextConfig",
    "DaemonConfig",
    "ExecutorConfig",
    "ForgeConfig",
    "GateConfig",
    "LiveConfig",
    "LoopConfig",
    "McpConfig",
    "McpServer",
    "ModelConfig",
    "PlanConfig",
    "Price",
    "ProjectConfig",
    "Risk",
    "SandboxConfig",
    "TrackerConfig",
    "find_config",
    "load",
]


class Config(Section):
    project: ProjectConfig = Field(default_factory=ProjectConfig)
    """Where the spec, tests and state are."""
    model: ModelConfig = Field(default_factory=ModelConfig)
    """Which model answers and how patiently."""
    loop: LoopConfig = Field(default_factory=LoopConfig)
    """Iteration limits and loop detection."""
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    """Cost and token limits."""
    act: ActConfig = Field(default_factory=ActConfig)
    """How work is executed and merged."""
    plan: PlanConfig = Field(default_factory=PlanConfig)
    """How large an iteration plan may be."""
    approval: ApprovalConfig = Field(default_factory=ApprovalConfig)
    """When a person must approve a plan."""
    daemon: DaemonConfig = Field(default_factory=DaemonConfig)
    """The background process."""
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    """The jail agent commands and test runs execute in."""
    gate: GateConfig = Field(default_factory=GateConfig)
    """What must hold before a change merges."""
    context: ContextConfig = Field(default_factory=ContextConfig)
    """What agents are shown of the repository."""
    forge: ForgeConfig = Field(default_factory=ForgeConfig)
    """Pull requests: the milestone on a forge, its CI and review comments."""
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig)
    """Who does a task's work: soda's own agent or a coding CLI in the jail."""
    tracker: TrackerConfig = Field(default_factory=TrackerConfig)
    """Work from the forge's issue tracker: labelled issues as queued milestones."""
    mcp: McpConfig = Field(default_factory=McpConfig)
    """MCP servers whose tools soda's agents may use, each run in the jail."""

    # Set by load(); not part of the file.
    root: Path = Field(default=Path("."), exclude=True)
    """Directory holding soda.toml; relative paths resolve against it."""

    @property
    def spec_path(self) -> Path:
        return self.root / self.project.spec

    @property
    def state_dir(self) -> Path:
        return self.root / self.project.state_dir

    @property
    def db_path(self) -> Path:
        return self.state_dir / "soda.db"

    @property
    def script_path(self) -> Path | None:
        return self.root / self.model.script if self.model.script else None


class LiveConfig:
    """The config a process runs on, in one place: the session, its agent runner
    and its call recorder (and the daemon) hold this one reference and read
    `current` at each use, so a reload (SIGHUP) is one assignment that every
    holder sees; a holder added later cannot keep a stale copy."""

    def __init__(self, config: Config) -> None:
        self.current = config

    @classmethod
    def of(cls, config: Config | LiveConfig) -> LiveConfig:
        """`config` itself when it is already live; a plain Config gets its own."""
        return config if isinstance(config, LiveConfig) else cls(config)


def find_config(start: Path) -> Path:
    """The nearest soda.toml at or above `start`."""
    start = start.resolve()
    for directory in (start, *start.parents):
        candidate = directory / CONFIG_NAME
        if candidate.is_file():
            return candidate
    raise ConfigError(f"no {CONFIG_NAME} in {start} or its parents (run `soda init` first)")


def load(path: Path) -> Config:
    """Read and validate a soda.toml; raise ConfigError with one line per problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text") from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(
            [_describe(path.name, text, err) for err in exc.errors(include_url=False)]
        ) from exc
    config.root = path.parent.resolve()
    _check_files(config, path.name, text)
    return config


def _check_files(config: Config, name: str, text: str) -> None:
    problems = []
    if not config.spec_path.is_file():
        line = _line_of(text, ("project", "spec"))
        where = f"{name}:{line}" if line else name
        problems.append(f"{where}: project.spec: file {config.project.spec} does not exist")
    if config.model.provider == "scripted":
        script = config.script_path
        if script is None:
            problems.append(f'{name}: model.script: required when model.provider = "scripted"')
        elif not script.is_file():
            line = _line_of(text, ("model", "script"))
            where = f"{name}:{line}" if line else name
            problems.append(f"{where}: model.script: file {config.model.script} does not exist")
    if problems:
        raise ConfigError(problems)


def _describe(name: str, text: str, err: ErrorDetails) -> str:
    loc = tuple(str(part) for part in err["loc"])
    key = ".".join(loc)
    line = _line_of(text, loc)
    where = f"{name}:{line}" if line else name
    if err["type"] == "extra_forbidden":
        return f"{where}: unknown key {key}"
    if err["type"] == "missing":
        return f"{where}: {key}: required"
    value = err.get("input")
    shown = f" (got {value!r})" if not isinstance(value, dict | list) else ""
    return f"{where}: {key}: {err['msg']}{shown}"


_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")
_KEY = re.compile(r'^\s*("?)([A-Za-z0-9_\-.]+)\1\s*=')


def _line_of(text: str, loc: tuple[str, ...]) -> int | None:
    """Best-effort line number of the key at `loc` (table headers and `key =` lines)."""
    table: tuple[str, ...] = ()
    best: int | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            table = tuple(part.strip().strip('"') for part in header.group(1).split("."))
            if table == loc:
                return number
            continue
        key = _KEY.match(line)
        if key:
            full = table + tuple(key.group(2).split("."))
            if full == loc:
                return number
            if loc[: len(full)] == full and best is None:
                best = number
    return best
