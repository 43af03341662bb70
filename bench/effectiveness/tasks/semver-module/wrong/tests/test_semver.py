import pytest
from semver import Version, parse


def test_parse() -> None:
    assert parse("v1.2.3-rc.1+b") == Version(1, 2, 3, ("rc", "1"), "b")


def test_str_is_canonical() -> None:
    assert str(parse("v1.2.3-rc.1+b")) == "1.2.3-rc.1+b"


def test_prerelease_is_lower() -> None:
    assert parse("1.0.0-rc.1") < parse("1.0.0")


def test_prereleases_in_order() -> None:
    assert parse("1.0.0-alpha") < parse("1.0.0-beta")


def test_refuses_garbage() -> None:
    with pytest.raises(ValueError, match="'1.2'"):
        parse("1.2")
