"""Benchmark tasks as data: one folder each under `bench/effectiveness/tasks/`.

    tasks/NAME/
      task.toml      title, difficulty, [limits], optional test_command, [acceptance], [repo]
      spec.md        the spec soda works toward (becomes specs/SPEC.md)
      files/         the starting repository, copied as it is ...
      generate.py    ... or a generator: `generate(root: Path) -> None` writes it ...
                     ... or [repo] git + rev in task.toml: a pinned public repository
      acceptance/    tests soda never sees; copied into the checkout only after the
                     run (into [acceptance] into, default "tests"); they decide "solved"
      solution/      the known solution, which the offline fake writes through soda's tools
      wrong/         a plausible wrong change (passes the visible tests, fails acceptance)

A change folder (solution/, wrong/) holds files written whole, plus an optional
`EDITS.toml` of `[[edit]]` entries (`path`, `old`, `new`) applied with edit_file,
for a file too large to rewrite. Everything here is plain data so that adding a
task never needs code in the harness.
"""

from __future__ import annotations

import importlib.util
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

TASKS_DIR = Path(__file__).resolve().parent / "tasks"
DEFAULT_TEST_COMMAND = "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {python} -m pytest -q"
"""The tasks' tests need no pytest plugins: not loading whatever else is installed
keeps each run fast. `{python}` is the Python the harness runs on."""
DIFFICULTIES = ("easy", "medium", "hard")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
EDITS_NAME = "EDITS.toml"
KEYS = {"title", "difficulty", "kind", "test_command", "limits", "acceptance", "repo"}
"""What task.toml may hold: a misspelt key is an error, not a silent default."""


class TaskError(Exception):
    """A task folder that cannot be used; the message names the folder and the problem."""


@dataclass(frozen=True)
class Limits:
    """What one run on the task may spend before it counts as unsolved."""

    max_iterations: int = 6
    max_cost_usd: float = 2.0
    timeout_seconds: float = 900.0


@dataclass(frozen=True)
class Edit:
    path: str
    old: str
    new: str


@dataclass(frozen=True)
class Change:
    """What a fake executor writes: whole files, then exact replacements."""

    writes: dict[str, str] = field(default_factory=dict)
    edits: tuple[Edit, ...] = ()

    @property
    def paths(self) -> list[str]:
        """Every file the change touches, in order, each once."""
        return list(dict.fromkeys([*self.writes, *(edit.path for edit in self.edits)]))

    def apply(self, root: Path) -> None:
        """Apply the change directly to a checkout (for `--check`: no model, no loop)."""
        for path, content in self.writes.items():
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
        for edit in self.edits:
            target = root / edit.path
            text = target.read_text(encoding="utf-8")
            if text.count(edit.old) != 1:
                raise TaskError(f"{edit.path}: the edit's old text must occur exactly once")
            target.write_text(text.replace(edit.old, edit.new, 1), encoding="utf-8")


@dataclass(frozen=True)
class Task:
    name: str
    folder: Path
    title: str
    difficulty: str
    kind: str
    """What sort of work it is, e.g. "one-function fix", "multi-file feature"."""
    limits: Limits
    test_command: str
    acceptance_into: str
    repo_git: str | None = None
    repo_rev: str | None = None

    @property
    def spec(self) -> str:
        return (self.folder / "spec.md").read_text(encoding="utf-8")

    @property
    def acceptance_files(self) -> list[Path]:
        """The acceptance tests, relative to acceptance/ (copied in that shape)."""
        root = self.folder / "acceptance"
        return sorted(
            p.relative_to(root) for p in root.rglob("*") if p.is_file() and _kept(p, root)
        )

    def command(self) -> str:
        """The test command with `{python}` spelled as this Python."""
        return self.test_command.replace("{python}", shlex.quote(sys.executable))

    def change(self, kind: str) -> Change:
        """The change in `solution/` or `wrong/` (empty when the folder is absent)."""
        root = self.folder / kind
        if not root.is_dir():
            return Change()
        writes = {
            p.relative_to(root).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(root.rglob("*"))
            if p.is_file() and _kept(p, root) and p.name != EDITS_NAME
        }
        edits: tuple[Edit, ...] = ()
        if (root / EDITS_NAME).is_file():
            data = tomllib.loads((root / EDITS_NAME).read_text(encoding="utf-8"))
            edits = tuple(Edit(e["path"], e["old"], e["new"]) for e in data.get("edit", []))
        return Change(writes, edits)

    def build(self, root: Path) -> None:
        """Write the starting repository's files into `root` (new or empty; the
        caller makes it a git repository and commits): from files/, the
        generator, or the pinned repository."""
        root.mkdir(parents=True, exist_ok=True)
        if self.repo_git:
            _clone_pinned(self.repo_git, self.repo_rev or "", root)
        files = self.folder / "files"
        if files.is_dir():
            shutil.copytree(files, root, dirs_exist_ok=True, ignore=IGNORED)
        generator = self.folder / "generate.py"
        if generator.is_file():
            _run_generator(generator, root)


def _kept(path: Path, root: Path) -> bool:
    parts = path.relative_to(root).parts
    skipped = any(part in ("__pycache__", ".pytest_cache") for part in parts)
    return not skipped and path.suffix != ".pyc"


def _run_generator(path: Path, root: Path) -> None:
    spec = importlib.util.spec_from_file_location(f"soda_bench_generate_{path.parent.name}", path)
    if spec is None or spec.loader is None:
        raise TaskError(f"{path}: cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    generate = getattr(module, "generate", None)
    if not callable(generate):
        raise TaskError(f"{path}: defines no generate(root) function")
    generate(root)


def _clone_pinned(url: str, rev: str, root: Path) -> None:
    """A pinned public repository at `rev`, as a plain tree (the harness makes its
    own history): the task's start is the same on every run."""
    with_git = root.parent / f".{root.name}-clone"
    subprocess.run(["git", "clone", "--quiet", url, str(with_git)], check=True)
    subprocess.run(["git", "-C", str(with_git), "checkout", "--quiet", rev], check=True)
    shutil.copytree(with_git, root, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".git"))
    shutil.rmtree(with_git)


def load_task(folder: Path) -> Task:
    """The task in `folder`; TaskError when it is incomplete or its task.toml is wrong."""
    name = folder.name
    try:
        data = tomllib.loads((folder / "task.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise TaskError(f"task {name}: cannot read task.toml: {exc}") from exc
    if unknown := sorted(set(data) - KEYS):
        raise TaskError(f"task {name}: task.toml: unknown key(s) {', '.join(unknown)}")
    if not (folder / "spec.md").is_file():
        raise TaskError(f"task {name}: no spec.md")
    if not (folder / "acceptance").is_dir():
        raise TaskError(f"task {name}: no acceptance/ tests")
    repo = data.get("repo", {})
    sources = [(folder / "files").is_dir(), (folder / "generate.py").is_file(), bool(repo)]
    if not any(sources):
        raise TaskError(f"task {name}: no files/, generate.py or [repo] to start from")
    if repo and not (isinstance(repo.get("rev"), str) and len(repo["rev"]) == 40):
        raise TaskError(f"task {name}: [repo] needs git = URL and rev = a full commit id")
    difficulty = data.get("difficulty", "medium")
    if difficulty not in DIFFICULTIES:
        raise TaskError(f"task {name}: difficulty must be one of {', '.join(DIFFICULTIES)}")
    try:
        limits = Limits(**data.get("limits", {}))
    except TypeError as exc:
        raise TaskError(f"task {name}: [limits]: {exc}") from exc
    return Task(
        name=name,
        folder=folder,
        title=str(data.get("title", name)),
        difficulty=difficulty,
        kind=str(data.get("kind", "")),
        limits=limits,
        test_command=str(data.get("test_command", DEFAULT_TEST_COMMAND)),
        acceptance_into=str(data.get("acceptance", {}).get("into", "tests")),
        repo_git=repo.get("git"),
        repo_rev=repo.get("rev"),
    )


def all_tasks(directory: Path = TASKS_DIR) -> list[Task]:
    """Every task folder (one holding a task.toml), easy ones first, then by name."""
    tasks = [load_task(p.parent) for p in directory.glob("*/task.toml")]
    return sorted(tasks, key=lambda task: (DIFFICULTIES.index(task.difficulty), task.name))


def select(tasks: list[Task], names: str | None) -> list[Task]:
    """The tasks named in `names` (comma-separated, in that order), or all of them."""
    if not names:
        return tasks
    by_name = {task.name: task for task in tasks}
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in by_name]
    if unknown:
        raise TaskError(f"unknown task(s) {', '.join(unknown)}; known: {', '.join(by_name)}")
    return [by_name[n] for n in wanted]
