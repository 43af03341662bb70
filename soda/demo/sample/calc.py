"""A tiny calculator library: the project soda works on in `soda demo`."""


def add(a: float, b: float) -> float:
    """Sum of a and b."""
    return a + b
