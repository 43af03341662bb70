"""Split sequences into fixed-size chunks."""

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def chunk(items: Sequence[T], size: int) -> list[list[T]]:
    """Split `items` into lists of `size` items each; the last one may be shorter."""
    if size < 1:
        raise ValueError("size must be at least 1")
    return [list(items[start : start + size]) for start in range(0, len(items) - 1, size)]


def flatten(chunks: list[list[T]]) -> list[T]:
    """The items of `chunks`, in order (the inverse of chunk)."""
    return [item for piece in chunks for item in piece]
