"""Creating users from what the sign-up form sent."""

from dataclasses import dataclass

MIN_AGE = 13
MAX_AGE = 130


class ValidationError(ValueError):
    """A field of the form is wrong; `field` names it, the message says why."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field


@dataclass(frozen=True)
class User:
    name: str
    email: str
    age: int


def create_user(name: str, email: str, age: int) -> User:
    """A new user from the form's fields, tidied up; ValidationError for the
    first field that is wrong (name, email, age)."""
    name = name.strip()
    if not name:
        raise ValidationError("name", "must not be empty")
    email = email.strip().lower()
    if not valid_email(email):
        raise ValidationError("email", f"not a valid address: {email!r}")
    if isinstance(age, bool) or not isinstance(age, int) or not MIN_AGE <= age < MAX_AGE:
        raise ValidationError("age", f"must be between {MIN_AGE} and {MAX_AGE}, got {age!r}")
    return User(name=name, email=email, age=age)


def valid_email(email: str) -> bool:
    """Something on each side of an @."""
    local, at, domain = email.partition("@")
    return bool(at and local and domain)
