"""Acceptance tests for due dates: hidden from soda, run after it."""

import json
from datetime import date
from pathlib import Path

import pytest
from todo.cli import main
from todo.model import Item

TODAY = date(2024, 5, 10)


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "todo.json")


def listed(capsys: pytest.CaptureFixture[str], path: str, *extra: str) -> list[str]:
    capsys.readouterr()
    assert main(["--file", path, "list", *extra], today=TODAY) == 0
    return capsys.readouterr().out.splitlines()


def test_item_has_an_optional_due_date() -> None:
    assert Item("x").due is None
    assert Item("x", due=date(2024, 1, 2)).due == date(2024, 1, 2)


def test_add_with_due_date_is_stored_and_listed(
    path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--file", path, "add", "taxes", "--due", "2024-05-31"]) == 0
    assert main(["--file", path, "add", "read"]) == 0
    data = json.loads(Path(path).read_text())
    assert data[0]["due"] == "2024-05-31"
    assert data[1]["due"] is None
    assert listed(capsys, path) == ["1. [ ] taxes (due 2024-05-31)", "2. [ ] read"]


@pytest.mark.parametrize("bad", ["31/05/2024", "2024-02-30", "tomorrow", "2024-5-1x"])
def test_bad_due_date(path: str, bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--file", path, "add", "taxes", "--due", bad])
    assert info.value.code == 2
    assert "--due must be a date YYYY-MM-DD" in capsys.readouterr().err
    assert not Path(path).exists() or json.loads(Path(path).read_text()) == []


def test_old_files_still_load(path: str, capsys: pytest.CaptureFixture[str]) -> None:
    Path(path).write_text(json.dumps([{"title": "old", "done": True}]))
    assert listed(capsys, path) == ["1. [x] old"]
    assert main(["--file", path, "add", "new", "--due", "2024-06-01"]) == 0
    assert listed(capsys, path) == ["1. [x] old", "2. [ ] new (due 2024-06-01)"]


def test_overdue(path: str, capsys: pytest.CaptureFixture[str]) -> None:
    for title, due in [
        ("late", "2024-05-09"),
        ("today", "2024-05-10"),
        ("later", "2024-06-01"),
        ("late but done", "2024-01-01"),
        ("never", None),
        ("also late", "2023-12-31"),
    ]:
        extra = ["--due", due] if due else []
        assert main(["--file", path, "add", title, *extra]) == 0
    assert main(["--file", path, "done", "4"]) == 0
    assert listed(capsys, path, "--overdue") == [
        "1. [ ] late (due 2024-05-09)",
        "6. [ ] also late (due 2023-12-31)",
    ]
    assert len(listed(capsys, path)) == 6
