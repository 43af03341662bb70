"""`soda init`: make a git repository ready for soda without disturbing it.

Writes a commented `soda.toml` (generated from the config models, so the comments
are the field docstrings), a spec template, and the state directory, which git is
told to ignore through `.git/info/exclude`. Existing files are never overwritten.

`project.base_branch` is the branch HEAD is on (`main`, `master`, `trunk`, ...),
unless the caller's config sets it; see `detect_base_branch`. Likewise
`project.test_command` uses the repository's own environment (a `.venv`, npm, Go,
cargo; see `soda.cli.detect`), written with a comment saying why.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import git
from git import Repo
from pydantic import BaseModel

from soda.cli.detect import Detected, detect_test_command
from soda.config import CONFIG_NAME, Config
from soda.repo.git import ensure_excluded, open_repo
from soda.store import open_db

SPEC_TEMPLATE = """\
# {title}

## Goal

Say in two or three sentences what should exist when this spec is met, and for whom.

## Acceptance criteria

- [ ] A behaviour a test can check, e.g. "`tool add 2 3` prints 5".
- [ ] Another one.
- [ ] The test suite passes.

## Constraints

- Libraries, style or boundaries soda must respect (e.g. "standard library only").
"""


@dataclass
class InitReport:
    root: Path
    created: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    base_branch: str | None = None
    """The base branch written into a new soda.toml (None when soda.toml was kept)."""
    base_branch_source: str = ""
    """How `base_branch` was chosen, e.g. "the branch HEAD is on"."""
    test_command: Detected | None = None
    """The test command written into a new soda.toml and why (None when soda.toml
    was kept, or the caller's config set the command)."""

    @property
    def changed(self) -> bool:
        return bool(self.created)


def init_project(directory: Path, config: Config | None = None) -> InitReport:
    """Create soda.toml, specs/SPEC.md and state/ at the top of the repository
    containing `directory`; keep whatever already exists."""
    repo = open_repo(directory)
    root = Path(repo.working_tree_dir or directory).resolve()
    config = config or Config()
    report = InitReport(root=root)

    source = "set by the caller"
    if "base_branch" not in config.project.model_fields_set:
        branch, source = detect_base_branch(repo, config.project.base_branch)
        project = config.project.model_copy(update={"base_branch": branch})
        config = config.model_copy(update={"project": project})
    detected = None
    notes: dict[str, list[str]] = {}
    if "test_command" not in config.project.model_fields_set and not (root / CONFIG_NAME).exists():
        detected = detect_test_command(root)
        config, notes = _with_test_command(config, detected)
    if _write_once(root / CONFIG_NAME, render_config(config, notes), report):
        report.base_branch = config.project.base_branch
        report.base_branch_source = source
        report.test_command = detected
    spec = root / config.project.spec
    _write_once(spec, SPEC_TEMPLATE.format(title=f"Spec for {root.name}"), report)

    state = root / config.project.state_dir
    if state.is_dir():
        report.kept.append(f"{config.project.state_dir}/")
    else:
        state.mkdir(parents=True)
        report.created.append(f"{config.project.state_dir}/")
    db_existed = (state / "soda.db").exists()
    open_db(state / "soda.db").close()
    if not db_existed:
        report.created.append(f"{config.project.state_dir}/soda.db")
    if ensure_excluded(repo, f"/{config.project.state_dir.strip('/')}/"):
        report.created.append(f".git/info/exclude entry for {config.project.state_dir}/")
    return report


def _with_test_command(config: Config, found: Detected) -> tuple[Config, dict[str, list[str]]]:
    """`config` with the detected test command (and the environment directory
    bound, the toolchains exposed), and the comments soda.toml gets for them."""
    project = config.project.model_copy(update={"test_command": found.command})
    box = config.sandbox
    bind = list(box.bind_ignored)
    if found.bind is not None and found.bind not in bind:
        bind.append(found.bind)
    expose = list(dict.fromkeys([*box.expose, *found.expose]))
    sandbox = box.model_copy(update={"bind_ignored": bind, "expose": expose})
    why = [f"soda init chose this: {found.why}.", *found.advice, *found.notes]
    notes = {"project.test_command": why}
    if found.expose:
        notes["sandbox.expose"] = [
            "soda init added the toolchain directories under your home the tests need."
        ]
    return config.model_copy(update={"project": project, "sandbox": sandbox}), notes


def detect_base_branch(repo: Repo, default: str) -> tuple[str, str]:
    """The branch soda should start from, and how it was found.

    The branch HEAD is on, if it has a commit. Otherwise (HEAD detached, or on a
    branch with no commit yet): the remote's default branch (`origin/HEAD`) if a
    local branch of that name exists, the only local branch, `main` or `master`,
    the unborn branch HEAD names (the first commit will create it), and last
    `default`."""
    heads = {head.name for head in repo.heads}
    current = _head_branch(repo)
    if current is not None and current in heads:
        return current, "the branch HEAD is on"
    remote_default = _origin_head(repo)
    if remote_default is not None and remote_default in heads:
        return remote_default, "the default branch of origin"
    if len(heads) == 1:
        return next(iter(heads)), "the only branch"
    for name in ("main", "master"):
        if name in heads:
            return name, "HEAD is detached; an existing branch"
    if current is not None:
        return current, "the branch HEAD is on (no commit yet)"
    return default, "HEAD is detached and no branch exists; the default"


def _head_branch(repo: Repo) -> str | None:
    """The name of the branch HEAD points at (even with no commit yet), or None
    when HEAD is detached."""
    try:
        ref = repo.head.reference
    except (TypeError, ValueError):  # detached HEAD
        return None
    path = ref.path
    return path.removeprefix("refs/heads/") if path.startswith("refs/heads/") else None


def _origin_head(repo: Repo) -> str | None:
    """The branch `refs/remotes/origin/HEAD` names (a clone's default branch)."""
    try:
        target = git.SymbolicReference(repo, "refs/remotes/origin/HEAD").reference.path
    except (TypeError, ValueError, OSError):
        return None
    prefix = "refs/remotes/origin/"
    return target.removeprefix(prefix) if target.startswith(prefix) else None


def _write_once(path: Path, text: str, report: InitReport) -> bool:
    """Write `path` unless it exists; True when it was written."""
    name = str(path.relative_to(report.root))
    if path.exists():
        report.kept.append(name)
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    report.created.append(name)
    return True


def render_config(config: Config, notes: Mapping[str, Sequence[str]] | None = None) -> str:
    """A complete soda.toml for `config`, every key preceded by its docstring and
    by `notes["section.key"]` (why soda init chose that value)."""
    lines = [
        "# soda configuration. Every key is optional; the values shown are the defaults.",
        "# Paths are relative to this file. Reference: README.md, section Configuration.",
    ]
    for section_name, section_field in Config.model_fields.items():
        if section_field.exclude:
            continue
        section: BaseModel = getattr(config, section_name)
        lines += ["", *_comment(section_field.description), f"[{section_name}]"]
        tables: list[str] = []
        for name, info in type(section).model_fields.items():
            value = getattr(section, name)
            if isinstance(value, dict):
                tables += _render_tables(f"{section_name}.{name}", info.description, value)
                continue
            lines += _comment(info.description)
            lines += _notes((notes or {}).get(f"{section_name}.{name}", ()))
            lines.append(
                f"{name} = {_toml(value)}" if value is not None else f"# {name} = (not set)"
            )
        lines += tables
    return "\n".join(lines) + "\n"


def _render_tables(prefix: str, doc: str | None, tables: dict[str, BaseModel]) -> list[str]:
    out = ["", *_comment(doc)]
    for key, model in tables.items():
        body = ", ".join(f"{k} = {_toml(v)}" for k, v in model.model_dump().items())
        out.append(f'[{prefix}."{key}"]')
        out.append(body.replace(", ", "\n"))
    return out


def _comment(doc: str | None) -> list[str]:
    return [f"# {line.strip()}" for line in (doc or "").splitlines()]


def _notes(notes: Sequence[str]) -> list[str]:
    """Notes as comment lines, wrapped; a note's continuation lines are indented."""
    lines = []
    for note in notes:
        wrapped = textwrap.wrap(note, 86, break_long_words=False, break_on_hyphens=False)
        lines += [f"# {'' if i == 0 else '  '}{line}" for i, line in enumerate(wrapped)]
    return lines


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    # JSON string and list syntax is valid TOML for the plain values we write.
    return json.dumps(value)
