"""Acceptance tests for wordfreq --top: hidden from soda, run after it."""

from pathlib import Path

import pytest
from wordfreq import main

TEXT = "the cat sat on the mat the cat ran a cat"


@pytest.fixture
def text(tmp_path: Path) -> str:
    path = tmp_path / "text.txt"
    path.write_text(TEXT)
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    assert main(list(argv)) == 0
    return capsys.readouterr().out.splitlines()


def test_top_keeps_the_first_lines(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    everything = run(capsys, text)
    assert run(capsys, text, "--top", "2") == everything[:2] == ["cat 3", "the 3"]


def test_top_keeps_tie_order(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, text, "--top", "4") == ["cat 3", "the 3", "a 1", "mat 1"]


def test_top_larger_than_the_words(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, text, "--top", "100") == run(capsys, text)


def test_without_top_nothing_changes(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert len(run(capsys, text)) == 7


@pytest.mark.parametrize("bad", ["0", "-3", "many"])
def test_top_must_be_positive(text: str, bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([text, "--top", bad])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert "--top must be a positive integer" in captured.err
    assert captured.out == ""


def test_help_mentions_top(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "--top" in capsys.readouterr().out
