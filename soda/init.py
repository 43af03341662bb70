"""`soda init`: make a git repository ready for soda without disturbing it.

Writes a commented `soda.toml` (generated from the config models, so the comments
are the field docstrings), a spec template, and the state directory, which git is
told to ignore through `.git/info/exclude`. Existing files are never overwritten.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from soda.config import CONFIG_NAME, Config
from soda.git import ensure_excluded, open_repo
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

    _write_once(root / CONFIG_NAME, render_config(config), report)
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


def _write_once(path: Path, text: str, report: InitReport) -> None:
    name = str(path.relative_to(report.root))
    if path.exists():
        report.kept.append(name)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    report.created.append(name)


def render_config(config: Config) -> str:
    """A complete soda.toml for `config`, every key preceded by its docstring."""
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


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    # JSON string and list syntax is valid TOML for the plain values we write.
    return json.dumps(value)
