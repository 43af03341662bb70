"""The executors are one checked registry: soda's own tool loop is an entry like
the coding CLIs, every program has its pin, and a name soda does not know is one
line (exit 2), never a KeyError."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest

from soda.agent.executors import EXECUTORS, PINS, executor_for, pins_for
from soda.config import load
from soda.config.sections import ExecutorBackend
from soda.errors import ConfigError, UserError


def test_the_registry_is_the_one_list_of_executors() -> None:
    assert set(EXECUTORS) == set(get_args(ExecutorBackend))
    assert set(PINS) == {name for name, e in EXECUTORS.items() if e.backend is not None}
    assert all(pin.tool == name for name, pin in PINS.items())
    assert executor_for("builtin").watched and not any(EXECUTORS[n].watched for n in PINS)


def test_a_name_without_a_program_or_an_entry_is_one_line() -> None:
    with pytest.raises(ConfigError, match=r"executor.backend: unknown executor 'nope' \(known: "):
        executor_for("nope")
    known = re.escape(", ".join(PINS))
    with pytest.raises(UserError, match=rf"unknown tool 'builtin' \(known: {known}\)"):
        pins_for(["builtin"])  # soda's own tool loop has nothing to install


def test_an_unknown_backend_in_soda_toml_is_a_config_error(tmp_path: Path) -> None:
    config = tmp_path / "soda.toml"
    config.write_text('[executor]\nbackend = "nope"\n')
    with pytest.raises(ConfigError, match="executor.backend"):
        load(config)
