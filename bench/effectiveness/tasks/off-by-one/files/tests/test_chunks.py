import pytest
from chunks import chunk, flatten


def test_even_split() -> None:
    assert chunk([1, 2, 3, 4], 2) == [[1, 2], [3, 4]]


def test_strings_split_into_lists() -> None:
    assert chunk("abcdef", 3) == [["a", "b", "c"], ["d", "e", "f"]]


def test_size_must_be_positive() -> None:
    with pytest.raises(ValueError):
        chunk([1, 2], 0)


def test_flatten() -> None:
    assert flatten([[1, 2], [3]]) == [1, 2, 3]
