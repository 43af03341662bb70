"""Creating users from what the sign-up form sent."""

from dataclasses import dataclass


@dataclass(frozen=True)
class User:
    name: str
    email: str
    age: int


def create_user(name: str, email: str, age: int) -> User:
    """A new user from the form's fields, tidied up."""
    return User(name=name.strip(), email=email.strip().lower(), age=age)
