from collections import Counter
from pathlib import Path

import pytest
from wordfreq import count_words, main, ranked


def test_count_words_ignores_case() -> None:
    assert count_words("The cat and the hat") == Counter({"the": 2, "cat": 1, "and": 1, "hat": 1})


def test_ranked_breaks_ties_alphabetically() -> None:
    assert ranked(Counter({"b": 1, "a": 1, "c": 2})) == [("c", 2), ("a", 1), ("b", 1)]


def test_main_prints_every_word(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = tmp_path / "text.txt"
    text.write_text("b a b")
    assert main([str(text)]) == 0
    assert capsys.readouterr().out == "b 2\na 1\n"
