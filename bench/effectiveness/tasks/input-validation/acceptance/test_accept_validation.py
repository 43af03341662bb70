"""Acceptance tests for sign-up validation: hidden from soda, run after it."""

import pytest
import signup
from signup import User, create_user


def refused(name: object, email: object, age: object) -> "signup.ValidationError":
    with pytest.raises(signup.ValidationError) as info:
        create_user(name, email, age)  # type: ignore[arg-type]
    return info.value


def test_validation_error_is_a_value_error() -> None:
    assert issubclass(signup.ValidationError, ValueError)


@pytest.mark.parametrize("name", ["", "   ", "\t\n"])
def test_empty_name(name: str) -> None:
    error = refused(name, "a@b.org", 30)
    assert error.field == "name"
    assert str(error) == "name: must not be empty"


@pytest.mark.parametrize(
    "email", ["bob", "@example.org", "bob@", "bob@example", "bob@.org", "bob@org.", "a@b@c.org"]
)
def test_bad_email(email: str) -> None:
    error = refused("Bob", email, 30)
    assert error.field == "email"
    assert str(error).startswith("email: ")
    assert repr(email) in str(error)


@pytest.mark.parametrize("age", [12, -4, 131, 1000])
def test_age_out_of_range(age: int) -> None:
    error = refused("Bob", "bob@example.org", age)
    assert error.field == "age"
    assert str(error).startswith("age: ")
    assert "13" in str(error) and "130" in str(error) and str(age) in str(error)


@pytest.mark.parametrize("age", [True, "30", 30.0, None])
def test_age_must_be_an_int(age: object) -> None:
    assert refused("Bob", "bob@example.org", age).field == "age"


def test_first_bad_field_is_reported() -> None:
    assert refused("", "bob", 5).field == "name"
    assert refused("Bob", "bob", 5).field == "email"


@pytest.mark.parametrize("age", [13, 130])
def test_bounds_are_inclusive(age: int) -> None:
    assert create_user("Bob", "Bob@Example.org", age) == User("Bob", "bob@example.org", age)
