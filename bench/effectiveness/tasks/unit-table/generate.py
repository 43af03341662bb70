"""Writes the starting repository of the unit-table task.

The unit table is long and regular, the kind of file people paste together:
one entry per unit with its kind, factor to the SI unit and a comment. It is
generated from the lists below, with two length factors mistyped (yard and
mile), so finding them means reading the table, not one obvious line.
"""

from pathlib import Path

LENGTH = [
    ("m", 1.0, "metre (SI)"),
    ("km", 1000.0, "kilometre"),
    ("cm", 0.01, "centimetre"),
    ("mm", 0.001, "millimetre"),
    ("um", 1e-06, "micrometre"),
    ("inch", 0.0254, "international inch"),
    ("foot", 0.3048, "international foot"),
    ("yard", 0.9114, "international yard"),
    ("mile", 1069.344, "international mile"),
    ("nautical_mile", 1852.0, "international nautical mile"),
    ("furlong", 201.168, "furlong (220 yards)"),
    ("chain", 20.1168, "chain (22 yards)"),
]
MASS = [
    ("kg", 1.0, "kilogram (SI)"),
    ("g", 0.001, "gram"),
    ("mg", 1e-06, "milligram"),
    ("t", 1000.0, "tonne"),
    ("lb", 0.45359237, "avoirdupois pound"),
    ("oz", 0.028349523125, "avoirdupois ounce"),
    ("stone", 6.35029318, "stone (14 pounds)"),
    ("grain", 6.479891e-05, "grain"),
]
VOLUME = [
    ("m3", 1.0, "cubic metre (SI)"),
    ("l", 0.001, "litre"),
    ("ml", 1e-06, "millilitre"),
    ("us_gallon", 0.003785411784, "US liquid gallon"),
    ("us_quart", 0.000946352946, "US liquid quart"),
    ("us_pint", 0.000473176473, "US liquid pint"),
    ("us_cup", 0.0002365882365, "US customary cup"),
    ("imp_gallon", 0.00454609, "imperial gallon"),
    ("imp_pint", 0.00056826125, "imperial pint"),
]
TIME = [
    ("s", 1.0, "second (SI)"),
    ("min", 60.0, "minute"),
    ("h", 3600.0, "hour"),
    ("day", 86400.0, "day"),
    ("week", 604800.0, "week"),
]

MODULE_HEAD = '''"""Unit conversion: FACTORS maps each unit to (kind, factor to the SI unit).

Generated table; convert() only multiplies and divides by it.
"""

FACTORS: dict[str, tuple[str, float]] = {
'''
MODULE_TAIL = '''}


def convert(value: float, source: str, target: str) -> float:
    """`value` in unit `source`, expressed in unit `target` (same kind)."""
    source_kind, source_factor = FACTORS[source]
    target_kind, target_factor = FACTORS[target]
    if source_kind != target_kind:
        raise ValueError(f"cannot convert {source_kind} ({source}) to {target_kind} ({target})")
    return value * source_factor / target_factor
'''

TESTS = """import pytest

from units import FACTORS, convert


def test_metric_lengths() -> None:
    assert convert(1500, "m", "km") == pytest.approx(1.5)
    assert convert(2.5, "cm", "mm") == pytest.approx(25)


def test_inches_and_feet() -> None:
    assert convert(12, "inch", "foot") == pytest.approx(1)


def test_mass() -> None:
    assert convert(1, "lb", "g") == pytest.approx(453.59237)
    assert convert(16, "oz", "lb") == pytest.approx(1)


def test_time() -> None:
    assert convert(2, "h", "min") == pytest.approx(120)


def test_kinds_do_not_mix() -> None:
    with pytest.raises(ValueError, match="cannot convert"):
        convert(1, "kg", "m")


def test_every_unit_has_a_kind() -> None:
    assert {kind for kind, _ in FACTORS.values()} == {"length", "mass", "volume", "time"}
"""

PYPROJECT = """[project]
name = "units"
version = "0.1.0"

[tool.pytest.ini_options]
pythonpath = ["."]
testpaths = ["tests"]
"""


def table() -> str:
    lines = []
    for kind, units in (("length", LENGTH), ("mass", MASS), ("volume", VOLUME), ("time", TIME)):
        lines.append(f"    # {kind}")
        for name, factor, comment in units:
            lines.append(f'    "{name}": ("{kind}", {factor!r}),  # {comment}')
    return "\n".join(lines) + "\n"


def generate(root: Path) -> None:
    """Write the project into `root`."""
    (root / "tests").mkdir(parents=True, exist_ok=True)
    (root / "units.py").write_text(MODULE_HEAD + table() + MODULE_TAIL, encoding="utf-8")
    (root / "tests" / "test_units.py").write_text(TESTS, encoding="utf-8")
    (root / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    (root / ".gitignore").write_text("__pycache__/\n*.py[cod]\n.pytest_cache/\n", encoding="utf-8")
    (root / "README.md").write_text(
        "# units\n\nConvert between units. Tests: `python -m pytest -q`.\n", encoding="utf-8"
    )
