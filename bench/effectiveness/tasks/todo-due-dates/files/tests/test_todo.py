from pathlib import Path

import pytest
from todo.cli import main


def test_add_list_done(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "todo.json")
    assert main(["--file", path, "add", "water the plants"]) == 0
    assert main(["--file", path, "add", "call mum"]) == 0
    assert main(["--file", path, "done", "2"]) == 0
    capsys.readouterr()
    assert main(["--file", path, "list"]) == 0
    assert capsys.readouterr().out == "1. [ ] water the plants\n2. [x] call mum\n"


def test_empty_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--file", str(tmp_path / "none.json"), "list"]) == 0
    assert capsys.readouterr().out == ""
