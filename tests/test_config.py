from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from soda.cli.init import render_config
from soda.cli.main import app
from soda.config import Config, find_config, load
from soda.errors import ConfigError


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


# --- numbers: every numeric key has a finite, documented range ----------------------


def numeric_keys() -> list[tuple[str, str]]:
    """Every int or float key of every section (a new one is covered automatically)."""
    keys = []
    for section, info in Config.model_fields.items():
        model = info.annotation
        if section == "root" or not isinstance(model, type) or not issubclass(model, BaseModel):
            continue
        for name, field in model.model_fields.items():
            if field.annotation in (int, float):
                keys.append((section, name))
    return keys


NUMERIC_KEYS = numeric_keys()
EXTREMES = ["inf", "-inf", "nan", "1e23", "1e308", "-1", "-1e308"]


def test_the_numeric_keys_are_found() -> None:
    for key in [("daemon", "tick_seconds"), ("loop", "loop_window"), ("model", "read_timeout")]:
        assert key in NUMERIC_KEYS
    assert len(NUMERIC_KEYS) >= 15


@pytest.mark.parametrize("value", EXTREMES)
@pytest.mark.parametrize(("section", "key"), NUMERIC_KEYS)
def test_extreme_number_is_refused_naming_the_key_and_line(
    tmp_path: Path, section: str, key: str, value: str
) -> None:
    path = write(tmp_path, f"[{section}]\n# a comment\n{key} = {value}\n")
    with pytest.raises(ConfigError) as info:
        load(path)
    (problem,) = info.value.problems
    assert problem.startswith(f"soda.toml:3: {section}.{key}: ")
    assert "\n" not in problem


@pytest.mark.parametrize("field", ["input", "output", "cache_write", "cache_read"])
@pytest.mark.parametrize("value", ["inf", "nan", "1e308", "-1"])
def test_extreme_price_is_refused_naming_the_key(tmp_path: Path, field: str, value: str) -> None:
    prices = {"input": "1.0", "output": "2.0", field: value}
    body = "\n".join(f"{name} = {number}" for name, number in prices.items())
    path = write(tmp_path, f'[model.prices."my-model"]\n{body}\n')
    with pytest.raises(ConfigError) as info:
        load(path)
    (problem,) = info.value.problems
    assert f"model.prices.my-model.{field}: " in problem


@pytest.mark.parametrize(("section", "key"), NUMERIC_KEYS)
def test_every_numeric_key_documents_its_finite_range(section: str, key: str) -> None:
    field = type(getattr(Config(), section)).model_fields[key]
    bounds = {type(item).__name__: item for item in field.metadata}
    assert {"Ge", "Gt"} & bounds.keys(), f"{section}.{key} has no lower bound"
    assert "Le" in bounds, f"{section}.{key} has no upper bound"
    upper = bounds["Le"].le
    shown = str(int(upper)) if upper == int(upper) else str(upper)
    assert shown in (field.description or ""), f"{section}.{key} does not document {shown}"


@pytest.mark.parametrize(
    ("section", "key", "low", "high"),
    [
        ("daemon", "tick_seconds", 0.05, 3600),
        ("model", "read_timeout", 0.1, 3600),
        ("model", "max_tokens", 1, 200_000),
        ("act", "command_timeout", 1, 86_400),
        ("budget", "max_cost_usd", 0, 10_000),
    ],
)
def test_the_ends_of_a_range_are_accepted(
    tmp_path: Path, section: str, key: str, low: float, high: float
) -> None:
    for value in (low, high):
        config = load(write(tmp_path, f"[{section}]\n{key} = {value}\n"))
        assert getattr(getattr(config, section), key) == value


def test_a_command_refuses_an_infinite_tick_with_exit_2(tmp_path: Path) -> None:
    path = write(tmp_path, "[daemon]\ntick_seconds = inf\n")
    result = CliRunner().invoke(app, ["-C", str(tmp_path), "status"])
    assert result.exit_code == 2, result.output
    assert "soda.toml:2: daemon.tick_seconds: Input should be a finite number" in result.output
    assert path.exists()
