from signup import User, create_user


def test_create_user_tidies_fields() -> None:
    user = create_user("  Ada Lovelace ", " Ada@Example.org ", 36)
    assert user == User(name="Ada Lovelace", email="ada@example.org", age=36)
