"""Acceptance tests for the chunk() fix: hidden from soda, run after it."""

import pytest
from chunks import chunk, flatten


def test_last_chunk_may_be_shorter() -> None:
    assert chunk([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]


def test_single_item() -> None:
    assert chunk([7], 1) == [[7]]


def test_size_larger_than_items() -> None:
    assert chunk([1, 2], 5) == [[1, 2]]


def test_empty() -> None:
    assert chunk([], 3) == []


@pytest.mark.parametrize("size", [1, 2, 3, 4, 7])
def test_no_item_is_lost(size: int) -> None:
    items = list(range(10))
    assert flatten(chunk(items, size)) == items


def test_size_zero_still_refused() -> None:
    with pytest.raises(ValueError):
        chunk([1], 0)
