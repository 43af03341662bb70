"""Acceptance tests for semver.py and release.latest: hidden from soda, run after it."""

import ast
import itertools
from pathlib import Path

import pytest
from release import latest


def test_parse_fields() -> None:
    from semver import parse

    version = parse("v1.2.3-rc.1+build.5")
    assert (version.major, version.minor, version.patch) == (1, 2, 3)
    assert version.prerelease == ("rc", "1")
    assert version.build == "build.5"
    assert str(version) == "1.2.3-rc.1+build.5"
    assert parse("0.0.7").prerelease == ()
    assert parse("0.0.7").build == ""
    assert str(parse("v10.20.30")) == "10.20.30"


@pytest.mark.parametrize("bad", ["1.2", "1.2.3.4", "01.2.3", "1.2.x", "", "1.2.3-", "a.b.c"])
def test_parse_refuses(bad: str) -> None:
    from semver import parse

    with pytest.raises(ValueError) as info:
        parse(bad)
    assert repr(bad) in str(info.value) or f'"{bad}"' in str(info.value)


SORTED = [
    "1.0.0-alpha",
    "1.0.0-alpha.1",
    "1.0.0-alpha.beta",
    "1.0.0-beta",
    "1.0.0-beta.2",
    "1.0.0-beta.11",
    "1.0.0-rc.1",
    "1.0.0",
    "1.0.1",
    "1.2.0",
    "1.10.0",
    "2.0.0",
]


def test_precedence() -> None:
    from semver import parse

    versions = [parse(text) for text in SORTED]
    for low, high in itertools.pairwise(versions):
        assert low < high and high > low and low != high
    assert sorted(reversed(versions)) == versions


def test_build_metadata_is_ignored() -> None:
    from semver import parse

    assert parse("1.0.0+a") == parse("1.0.0+b")
    assert not parse("1.0.0+a") < parse("1.0.0+b")


def test_latest_uses_versions() -> None:
    assert latest(["v1.9.0", "v1.10.0", "v1.2.0"]) == "v1.10.0"
    assert latest(["2.0.0-rc.1", "1.9.9", "nightly", "v2.0.0-rc.2"]) == "v2.0.0-rc.2"
    assert latest(["1.0.0-rc.10", "1.0.0-rc.9"]) == "1.0.0-rc.10"
    assert latest(["nightly", "latest"]) is None


def test_the_module_has_its_own_tests() -> None:
    path = Path(__file__).with_name("test_semver.py")
    assert path.is_file(), "tests/test_semver.py is missing"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    tests = [
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test")
    ]
    assert len(tests) >= 4, tests
