from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from soda.config import Config, find_config, load
from soda.errors import ConfigError
from soda.init import render_config


def write(tmp_path: Path, text: str, spec: bool = True) -> Path:
    if spec:
        (tmp_path / "specs").mkdir(exist_ok=True)
        (tmp_path / "specs" / "SPEC.md").write_text("# Spec\n")
    path = tmp_path / "soda.toml"
    path.write_text(text)
    return path


def test_empty_file_gives_working_defaults(tmp_path: Path) -> None:
    config = load(write(tmp_path, ""))
    assert config.project.base_branch == "main"
    assert config.model.provider == "anthropic"
    assert config.spec_path == tmp_path.resolve() / "specs" / "SPEC.md"
    assert config.db_path == tmp_path.resolve() / "state" / "soda.db"


def test_misspelled_key_names_key_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, '[project]\nbase_branch = "main"\ntest_comand = "pytest"\n')
    with pytest.raises(ConfigError) as info:
        load(path)
    assert info.value.problems == ["soda.toml:3: unknown key project.test_comand"]


def test_wrong_type_names_key_line_and_value(tmp_path: Path) -> None:
    path = write(tmp_path, '[loop]\n\nmax_iterations = "many"\n')
    with pytest.raises(ConfigError) as info:
        load(path)
    (problem,) = info.value.problems
    assert problem.startswith("soda.toml:3: loop.max_iterations: ")
    assert "'many'" in problem


def test_one_line_per_problem(tmp_path: Path) -> None:
    path = write(tmp_path, "[model]\nmax_retries = -1\n[budgett]\nx = 1\n")
    with pytest.raises(ConfigError) as info:
        load(path)
    assert len(info.value.problems) == 2
    assert any("model.max_retries" in p for p in info.value.problems)
    assert any(p == "soda.toml:3: unknown key budgett" for p in info.value.problems)


def test_missing_spec_is_reported(tmp_path: Path) -> None:
    path = write(tmp_path, '[project]\nspec = "specs/nope.md"\n', spec=False)
    with pytest.raises(ConfigError, match=r"soda.toml:2: project.spec: file specs/nope.md"):
        load(path)


def test_scripted_provider_needs_a_script(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="model.script: required"):
        load(write(tmp_path, '[model]\nprovider = "scripted"\n'))


def test_invalid_toml_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="invalid TOML"):
        load(write(tmp_path, "[project\n"))


def test_find_config_walks_up(tmp_path: Path) -> None:
    write(tmp_path, "")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find_config(deep) == (tmp_path / "soda.toml").resolve()


def test_find_config_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="soda init"):
        find_config(tmp_path)


def test_rendered_config_round_trips_and_documents_every_field() -> None:
    text = render_config(Config())
    assert Config.model_validate(tomllib.loads(text)) == Config()
    for section in Config.model_fields:
        model = type(getattr(Config(), section))
        if section == "root":
            continue
        for name, info in model.model_fields.items():
            assert info.description, f"{section}.{name} has no docstring"
            assert name in text


def test_repository_soda_toml_is_valid() -> None:
    root = Path(__file__).resolve().parent.parent
    config = load(root / "soda.toml")
    assert config.spec_path.is_file()
