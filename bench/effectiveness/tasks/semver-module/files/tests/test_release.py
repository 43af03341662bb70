from release import latest


def test_latest() -> None:
    assert latest(["v1.0.0", "v1.2.0", "v1.1.0"]) == "v1.2.0"


def test_no_release() -> None:
    assert latest([]) is None
