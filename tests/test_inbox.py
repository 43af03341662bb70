"""The human-input queue, end to end on real files, real SQLite and real events."""

from __future__ import annotations

import errno
import json
import os
import re
import socket
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from sqlite_utils import Database

from soda.contracts import HumanInput
from soda.events import Events
from soda.human import ControlAction, HumanQueue, QueuedInput, Route
from soda.human.files import IngestReport, ingest, recover_claimed_files
from soda.human.parse import queued
from soda.human.routing import ROUTES, contract_keys, route
from soda.human.write import describe, write_input
from soda.store import human_inputs
from soda.store.db import open_db
from soda.store.human_inputs import claim, mark_applied, release_claims
from soda.trace import SqliteTracker


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def db(state: Path) -> Database:
    return open_db(state / "soda.db")


@pytest.fixture
def events(db: Database, state: Path) -> Events:
    return Events(db, state / "logs" / "events.jsonl")


def drop(state: Path, name: str, content: str | bytes | dict[str, Any], age: float = 60) -> Path:
    """Put a file in the inbox as a person would, last written `age` seconds ago."""
    path = state / "inbox" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, dict):
        content = json.dumps(content)
    data = content.encode() if isinstance(content, str) else content
    path.write_bytes(data)
    stamp = time.time() - age
    os.utime(path, (stamp, stamp))
    return path


def pending(db: Database) -> list[QueuedInput]:
    return [queued(*row) for row in human_inputs.pending(db)]


def rows(db: Database) -> list[dict[str, Any]]:
    return list(db["human_inputs"].rows)


def emitted(db: Database, kind: str) -> list[dict[str, Any]]:
    found = db.execute("SELECT data_json FROM events WHERE kind = ? ORDER BY id", [kind])
    return [json.loads(row[0]) for row in found.fetchall()]


def regular_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.is_file() and not p.name.startswith("."))


# --- accepted ---------------------------------------------------------------


def test_json_file_is_recorded_pending_and_moved_to_processed(
    state: Path, db: Database, events: Events
) -> None:
    drop(state, "close.json", {"kind": "override", "action": "close", "task_id": 4})

    report = ingest(state, db, events)

    [row] = rows(db)
    assert report.accepted == [row["id"]]
    assert (report.rejected, report.skipped) == ([], [])
    assert row["kind"] == "override"
    assert row["status"] == "pending"
    assert row["source"] == "inbox"
    assert row["source_file"] == "close.json"
    assert json.loads(row["payload_json"]) == {"kind": "override", "action": "close", "task_id": 4}
    assert regular_files(state / "inbox") == []
    assert regular_files(state / "inbox" / "processed") == ["close.json"]
    expected = {"id": row["id"], "kind": "override", "file": "close.json"}
    assert emitted(db, "inbox.accepted") == [expected]
    log = (state / "logs" / "events.jsonl").read_text().splitlines()
    assert json.loads(log[-1])["kind"] == "inbox.accepted"


@pytest.mark.parametrize("name", ["hint.md", "hint.txt", "hint"])
def test_plain_text_is_a_correction(state: Path, db: Database, events: Events, name: str) -> None:
    drop(state, name, "\nPrefer pathlib over os.path.\n\nKeep it short.\n")

    ingest(state, db, events)

    [item] = pending(db)
    assert item.payload == HumanInput(
        kind="correction", text="Prefer pathlib over os.path.\n\nKeep it short."
    )
    assert item.source_file == name


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "---\nkind: spec_change\nmode: amend\n---\nAlso support TOML.\n",
            HumanInput(kind="spec_change", mode="amend", text="Also support TOML."),
        ),
        (
            "---\nkind: override\naction: close\ntask_id: 4\n---\n",
            HumanInput(kind="override", action="close", task_id=4),
        ),
        (
            "---\r\nkind: approve\r\n# a comment line\r\ntarget: '3'\r\n---\r\nLooks right.",
            HumanInput(kind="approve", target=3, text="Looks right."),
        ),
        ("---\n---\nJust words.", HumanInput(kind="correction", text="Just words.")),
        ("---\nkind: pause\n---\n", HumanInput(kind="pause")),
    ],
)
def test_front_matter_sets_fields_and_the_body_is_text(
    state: Path, db: Database, events: Events, text: str, expected: HumanInput
) -> None:
    drop(state, "input.md", text)

    report = ingest(state, db, events)

    assert report.rejected == []
    assert [item.payload for item in pending(db)] == [expected]


# --- rejected ---------------------------------------------------------------

REJECTIONS = [
    ("broken.json", b'{"kind": "correction",\n  "text": }', "invalid JSON at line 2, column 11"),
    ("nap.json", b'{"kind": "nap"}', "unknown kind 'nap'"),
    ("approve.json", b'{"kind": "approve"}', "violated at $: Value error, kind 'approve' needs"),
    ("extra.json", b'{"kind": "pause", "colour": "red"}', "'colour' was unexpected"),
    ("wrongtype.json", b'{"kind": "approve", "target": "three"}', "at $.target"),
    ("list.json", b"[1, 2]", "is not of type 'object'"),
    ("deep.json", b"[" * 100_000, "invalid JSON: nested deeper than 64 levels"),
    (
        "deepish.json",
        b'{"kind": "correction", "text": "x", "k": ' + b"[" * 65 + b"]" * 65 + b"}",
        "nested deeper than 64 levels",
    ),
    ("huge.txt", b"x" * (256 * 1024 + 1), "too large"),
    ("latin1.txt", b"caf\xe9 au lait", "not UTF-8"),
    ("empty.md", b"", "file is empty"),
    ("blank.txt", b" \n\t\n", "file is empty"),
    ("blanktext.json", b'{"kind": "correction", "text": "  "}', "text is empty"),
    ("headeronly.md", b"---\nkind: correction\n---\n", "empty text"),
    ("unclosed.md", b"---\nkind: pause\nhello", "never closed"),
    ("noseparator.md", b"---\nkind pause\n---\n", "line 2 is not 'key: value'"),
    ("twice.md", b"---\nkind: pause\nkind: stop\n---\n", "repeats key 'kind'"),
    ("both.md", b"---\ntext: one\n---\ntwo", "both in the front matter and in the body"),
    ("surrogate.json", b'{"kind": "correction", "text": "\\ud800"}', "unpaired surrogate"),
    ("notes.pdf", b"%PDF-1.4", "unsupported extension '.pdf'"),
]


@pytest.mark.parametrize(("name", "content", "problem"), REJECTIONS)
def test_bad_file_is_rejected_with_a_reason(
    state: Path, db: Database, events: Events, name: str, content: bytes, problem: str
) -> None:
    drop(state, name, content)

    report = ingest(state, db, events)

    rejected_dir = state / "inbox" / "rejected"
    assert report.rejected == [rejected_dir / name]
    assert report.accepted == []
    assert (rejected_dir / name).read_bytes() == content  # kept exactly as dropped
    reason = (rejected_dir / f"{name}.reason").read_text()
    assert reason.count("\n") == 1 and reason.endswith("\n")
    assert reason.startswith(f"{name}: ")
    assert problem in reason
    assert rows(db) == []
    assert regular_files(state / "inbox") == []
    assert emitted(db, "inbox.rejected") == [{"file": name, "reason": reason.strip()}]


def test_file_name_that_is_not_utf8_is_rejected(state: Path, db: Database, events: Events) -> None:
    (state / "inbox").mkdir(parents=True)
    raw_name = b"caf\xe9.txt"
    path = os.path.join(os.fsencode(state / "inbox"), raw_name)
    with open(path, "wb") as fh:
        fh.write(b"words")
    os.utime(path, (time.time() - 60, time.time() - 60))

    report = ingest(state, db, events)

    [dest] = report.rejected
    assert os.fsencode(dest.name) == raw_name
    reason = Path(f"{dest}.reason").read_text()
    assert "file name is not valid UTF-8" in reason
    assert rows(db) == []


# --- which files are taken --------------------------------------------------


def test_dot_temp_and_editor_files_are_left_alone(
    state: Path, db: Database, events: Events
) -> None:
    names = [".hidden.json", "draft.md~", "a.swp", "a.swx", "a.tmp", "a.part", "a.crdownload"]
    for name in names:
        drop(state, name, "halfway")
    (state / "inbox" / ".hidden-dir").mkdir()

    report = ingest(state, db, events)

    assert (report.accepted, report.rejected, report.skipped) == ([], [], [])
    for name in names:
        assert (state / "inbox" / name).exists()
    assert (state / "inbox" / ".hidden-dir").is_dir()
    assert rows(db) == []


def test_young_file_is_skipped_then_taken_once_settled(
    state: Path, db: Database, events: Events
) -> None:
    path = drop(state, "typing.md", "still typing", age=0)

    first = ingest(state, db, events, settle_seconds=60)

    assert (first.accepted, first.skipped) == ([], ["typing.md"])
    assert path.exists()
    settled = time.time() - 120
    os.utime(path, (settled, settled))

    second = ingest(state, db, events, settle_seconds=60)

    assert second.skipped == []
    assert len(second.accepted) == 1
    assert not path.exists()


def test_files_are_taken_oldest_first(state: Path, db: Database, events: Events) -> None:
    drop(state, "b-newer.md", "second", age=10)
    drop(state, "a-older.md", "first", age=20)

    ingest(state, db, events)

    assert [item.payload.text for item in pending(db)] == ["first", "second"]


def test_name_collisions_never_overwrite(state: Path, db: Database, events: Events) -> None:
    for round_number in range(3):
        drop(state, "note.md", f"note {round_number}")
        drop(state, "bad.json", f"{{bad {round_number}")
        ingest(state, db, events)

    processed = state / "inbox" / "processed"
    rejected = state / "inbox" / "rejected"
    assert regular_files(processed) == ["note-1.md", "note-2.md", "note.md"]
    assert {(processed / n).read_text() for n in regular_files(processed)} == {
        "note 0",
        "note 1",
        "note 2",
    }
    assert regular_files(rejected) == [
        "bad-1.json",
        "bad-1.json.reason",
        "bad-2.json",
        "bad-2.json.reason",
        "bad.json",
        "bad.json.reason",
    ]
    assert (rejected / "bad-2.json").read_text() == "{bad 2"
    assert (rejected / "bad-2.json.reason").read_text().startswith("bad.json: invalid JSON")


def test_concurrent_ingesters_record_each_file_once(state: Path, events: Events) -> None:
    for number in range(40):
        drop(state, f"note-{number:02}.md", f"note {number}")
    errors: list[BaseException] = []

    def run() -> None:
        try:
            own_db = open_db(state / "soda.db")
            ingest(state, own_db, Events(own_db), settle_seconds=0)
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    db = open_db(state / "soda.db")
    assert sorted(item.source_file or "" for item in pending(db)) == [
        f"note-{number:02}.md" for number in range(40)
    ]
    assert len(regular_files(state / "inbox" / "processed")) == 40


def test_broken_state_dir_raises(tmp_path: Path, db: Database, events: Events) -> None:
    not_a_dir = tmp_path / "state-file"
    not_a_dir.write_text("")
    with pytest.raises(OSError):
        ingest(not_a_dir, db, events)


# --- hostile entries: any name, any type -------------------------------------

NAME_MAX = 255


def settle(path: Path | bytes) -> None:
    stamp = time.time() - 60
    os.utime(path, (stamp, stamp), follow_symlinks=False)


def ingest_within(seconds: float, state: Path, db: Database, events: Events) -> IngestReport:
    """Ingest in a thread with a deadline, so a pass that blocks fails instead of hanging."""
    result: list[IngestReport | BaseException] = []

    def run() -> None:
        try:
            result.append(ingest(state, db, events))
        except BaseException as exc:  # surfaced below
            result.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"ingest blocked for over {seconds}s"
    [outcome] = result
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def reason_of(dest: Path) -> str:
    return Path(f"{dest}.reason").read_text()


def fits(dest: Path) -> bool:
    """The rejected entry's name and its `.reason` companion both fit in NAME_MAX."""
    return len(os.fsencode(dest.name + ".reason")) <= NAME_MAX


def test_long_name_is_rejected_under_a_shortened_name_and_ingest_survives(
    state: Path, db: Database, events: Events
) -> None:
    name = "n" * 246 + ".pdf"  # 250 bytes: name + ".reason" would be 257
    assert len(name.encode()) == 250
    drop(state, name, b"%PDF")

    report = ingest(state, db, events)

    [dest] = report.rejected
    assert dest.parent == state / "inbox" / "rejected"
    assert fits(dest)
    assert dest.name.startswith("n" * 200) and dest.name.endswith(".pdf")
    assert dest.read_bytes() == b"%PDF"
    assert reason_of(dest).startswith(f"{name}: unsupported extension")  # the full name
    assert regular_files(state / "inbox") == []
    assert [e["file"] for e in emitted(db, "inbox.rejected")] == [name]
    assert ingest(state, db, events) == IngestReport()  # and the next pass is calm


def test_two_rejected_files_with_the_same_long_name_are_both_kept(
    state: Path, db: Database, events: Events
) -> None:
    name = "é" * 123 + ".json"  # 251 bytes of two-byte characters
    firsts = []
    for number in range(3):
        drop(state, name, f"{{broken {number}")
        firsts += ingest(state, db, events).rejected

    assert len(set(firsts)) == 3
    for number, dest in enumerate(firsts):
        assert fits(dest)
        assert dest.read_text() == f"{{broken {number}"
        assert dest.name.endswith(".json")
        assert reason_of(dest).startswith(f"{name}: invalid JSON")
    rejected = state / "inbox" / "rejected"
    assert len(regular_files(rejected)) == 6


def test_long_name_is_accepted_and_a_second_one_kept_beside_it(
    state: Path, db: Database, events: Events
) -> None:
    name = "w" * 251 + ".md"  # 254 bytes: fits in processed/, but "-1" would not
    for number in range(2):
        drop(state, name, f"advice {number}")
        assert len(ingest(state, db, events).accepted) == 1

    assert [item.source_file for item in pending(db)] == [name, name]
    processed = regular_files(state / "inbox" / "processed")
    assert len(processed) == 2 and name in processed
    assert all(len(os.fsencode(n)) <= NAME_MAX for n in processed)


def test_recovery_returns_a_long_named_file_beside_its_namesake_without_a_traceback(
    state: Path, db: Database, events: Events
) -> None:
    name = "r" * 252 + ".md"  # 255 bytes, the most a name can have
    drop(state, f".claimed/{name}", "stranded mid-claim")
    drop(state, name, "a newer file with the same name")

    [moved] = recover_claimed_files(state, db, events)

    assert moved.parent == state / "inbox"
    assert moved.name != name and len(os.fsencode(moved.name)) <= NAME_MAX
    assert moved.read_text() == "stranded mid-claim"
    assert (state / "inbox" / name).read_text() == "a newer file with the same name"
    report = ingest(state, db, events)
    assert len(report.accepted) == 2


@pytest.mark.parametrize(
    "raw_name", [b"\xff\xfe.md", b"\xff" * 250 + b".txt", b"ok-then-\xe9" + b"x" * 240]
)
def test_name_that_is_not_utf8_is_rejected_without_a_traceback(
    state: Path, db: Database, events: Events, raw_name: bytes
) -> None:
    inbox = os.fsencode(state / "inbox")
    os.makedirs(inbox)
    path = os.path.join(inbox, raw_name)
    with open(path, "wb") as fh:
        fh.write(b"words")
    settle(path)

    report = ingest_within(10, state, db, events)

    [dest] = report.rejected
    assert fits(dest)
    assert os.fsencode(dest.name)[:2] == raw_name[:2]  # the name's own bytes, not a guess
    assert "file name is not valid UTF-8" in reason_of(dest)
    assert dest.read_bytes() == b"words"
    assert rows(db) == []
    [event] = emitted(db, "inbox.rejected")
    assert event["file"] == repr(os.fsdecode(raw_name))
    log = (state / "logs" / "events.jsonl").read_text()
    assert "inbox.rejected" in log


def test_symlink_pointing_outside_is_moved_not_followed(
    tmp_path: Path, state: Path, db: Database, events: Events
) -> None:
    outside = tmp_path / "secret.md"
    outside.write_text("not for soda")
    link = state / "inbox" / "link.md"
    link.parent.mkdir(parents=True)
    link.symlink_to(outside)
    settle(link)

    report = ingest_within(10, state, db, events)

    [dest] = report.rejected
    assert dest == state / "inbox" / "rejected" / "link.md"
    assert dest.is_symlink() and os.readlink(dest) == str(outside)  # the link itself moved
    assert outside.read_text() == "not for soda"  # its target untouched
    assert not os.path.lexists(link)
    reason = reason_of(dest)
    assert f"a symbolic link to {outside}" in reason and "never follows links" in reason
    assert rows(db) == []


def test_dangling_symlink_and_symlink_to_a_fifo_are_rejected_without_blocking(
    tmp_path: Path, state: Path, db: Database, events: Events
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    (state / "inbox").mkdir(parents=True)
    (state / "inbox" / "to-fifo.md").symlink_to(fifo)
    (state / "inbox" / "dangling.md").symlink_to(tmp_path / "nowhere")
    for name in ("to-fifo.md", "dangling.md"):
        settle(state / "inbox" / name)

    report = ingest_within(10, state, db, events)

    assert sorted(dest.name for dest in report.rejected) == ["dangling.md", "to-fifo.md"]
    assert all(dest.is_symlink() for dest in report.rejected)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_fifo_is_moved_to_rejected_without_being_opened(
    state: Path, db: Database, events: Events
) -> None:
    (state / "inbox").mkdir(parents=True)
    fifo = state / "inbox" / "pipe.md"
    os.mkfifo(fifo)
    settle(fifo)

    report = ingest_within(10, state, db, events)

    [dest] = report.rejected
    assert dest == state / "inbox" / "rejected" / "pipe.md"
    assert stat.S_ISFIFO(os.lstat(dest).st_mode)
    assert "a FIFO (named pipe), not a regular file" in reason_of(dest)


def test_fifo_stranded_mid_claim_is_recovered_without_blocking(
    state: Path, db: Database, events: Events
) -> None:
    (state / "inbox" / ".claimed").mkdir(parents=True)
    os.mkfifo(state / "inbox" / ".claimed" / "pipe.json")
    settle(state / "inbox" / ".claimed" / "pipe.json")

    report = ingest_within(10, state, db, events)

    assert [dest.name for dest in report.rejected] == ["pipe.json"]
    assert os.listdir(state / "inbox" / ".claimed") == []


def test_socket_is_moved_to_rejected(
    state: Path, db: Database, events: Events, monkeypatch: pytest.MonkeyPatch
) -> None:
    (state / "inbox").mkdir(parents=True)
    monkeypatch.chdir(state / "inbox")  # a relative path keeps within AF_UNIX's 108 bytes
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind("sock.md")
        settle(state / "inbox" / "sock.md")

        report = ingest_within(10, state, db, events)
    finally:
        server.close()

    [dest] = report.rejected
    assert stat.S_ISSOCK(os.lstat(dest).st_mode)
    assert "a socket, not a regular file" in reason_of(dest)


def test_directory_is_moved_to_rejected_whole(state: Path, db: Database, events: Events) -> None:
    drop(state, "notes/deep.md", "not directly in the inbox")
    drop(state, "notes/more/deeper.md", "nor this")
    settle(state / "inbox" / "notes")

    report = ingest_within(10, state, db, events)

    [dest] = report.rejected
    assert dest == state / "inbox" / "rejected" / "notes"
    assert (dest / "deep.md").read_text() == "not directly in the inbox"
    assert (dest / "more" / "deeper.md").read_text() == "nor this"
    assert "a directory" in reason_of(dest)
    assert rows(db) == []
    # soda's own folders stay where they are
    assert {p.name for p in (state / "inbox").iterdir()} == {
        ".claimed",
        ".lock",
        "processed",
        "rejected",
    }


def test_every_kind_of_entry_in_one_pass(
    tmp_path: Path, state: Path, db: Database, events: Events
) -> None:
    inbox = state / "inbox"
    drop(state, "good.md", "use pathlib")
    drop(state, "x" * 245 + ".json", "{")
    drop(state, "dir/inside.md", "x")
    os.mkfifo(inbox / "fifo")
    (inbox / "link.md").symlink_to(tmp_path)
    with open(os.path.join(os.fsencode(inbox), b"\xff\xfe.md"), "wb") as fh:
        fh.write(b"hi")
    for entry in os.scandir(os.fsencode(inbox)):
        settle(entry.path)

    report = ingest_within(10, state, db, events)

    assert len(report.accepted) == 1
    assert len(report.rejected) == 5
    assert all(fits(dest) and os.path.exists(f"{dest}.reason") for dest in report.rejected)
    assert sorted(os.listdir(inbox)) == [".claimed", ".lock", "processed", "rejected"]


def test_an_entry_that_cannot_be_moved_is_reported_once_and_the_pass_goes_on(
    state: Path, db: Database, events: Events, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As root (tests often are) permissions do not stop a rename; a mount point
    # would (EBUSY), so the refusal is simulated for one name.
    real_rename: Callable[..., None] = os.rename

    def rename(src: Any, dst: Any) -> None:
        if os.fspath(src).endswith("stuck.md"):
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), src)
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    drop(state, "stuck.md", "x", age=120)
    drop(state, "fine.md", "y")

    first = ingest(state, db, events)
    second = ingest(state, db, events)

    assert (first.unmovable, len(first.accepted)) == (["stuck.md"], 1)
    assert (second.unmovable, second.accepted) == (["stuck.md"], [])
    assert (state / "inbox" / "stuck.md").read_text() == "x"
    assert emitted(db, "inbox.unmovable") == [
        {"file": "stuck.md", "error": os.strerror(errno.EBUSY)}
    ]


# --- write_input ------------------------------------------------------------


def test_write_input_round_trips_through_ingest(state: Path, db: Database, events: Events) -> None:
    item = HumanInput(kind="override", action="close", task_id=4, text="done by hand")

    path = write_input(state, item)

    assert path.parent == state / "inbox"
    assert re.fullmatch(r"\d{8}T\d{12}Z-override-[0-9a-f]{6}\.json", path.name)
    assert [p.name for p in (state / "inbox").iterdir()] == [path.name]  # no temp left
    report = ingest(state, db, events, settle_seconds=0)
    [queued] = pending(db)
    assert report.accepted == [queued.id]
    assert (queued.kind, queued.payload, queued.source_file) == ("override", item, path.name)


def test_write_input_names_are_unique(state: Path) -> None:
    item = HumanInput(kind="pause")
    paths = {write_input(state, item) for _ in range(20)}
    assert len(paths) == 20


# --- the queue --------------------------------------------------------------


def queue(state: Path, db: Database, events: Events, *texts: str) -> list[int]:
    for age, text in enumerate(texts):
        drop(state, f"{text}.md", text, age=100 - age)
    return ingest(state, db, events).accepted


def status(db: Database, row_id: int) -> dict[str, Any]:
    return db["human_inputs"].get(row_id)


def test_claim_then_apply(state: Path, db: Database, events: Events) -> None:
    first, second, third = queue(state, db, events, "one", "two", "three")

    assert claim(db, [first, second], iteration=7) == 2
    assert [item.id for item in pending(db)] == [third]
    assert status(db, first)["status"] == "claimed"
    assert status(db, first)["claimed_iteration"] == 7

    assert mark_applied(db, [first], iteration=7, response="added a test for it") == 1
    applied = status(db, first)
    assert applied["status"] == "applied"
    assert applied["applied_iteration"] == 7
    assert applied["applied_at"]
    assert applied["response"] == "added a test for it"


def test_claim_only_takes_pending_and_apply_never_repeats(
    state: Path, db: Database, events: Events
) -> None:
    [row_id] = queue(state, db, events, "one")
    mark_applied(db, [row_id], iteration=1, response="first")

    assert claim(db, [row_id], iteration=2) == 0
    assert mark_applied(db, [row_id], iteration=2, response="again") == 0
    assert status(db, row_id)["response"] == "first"
    assert claim(db, [], iteration=2) == 0


def test_release_claims_returns_claimed_to_pending(
    state: Path, db: Database, events: Events
) -> None:
    first, second = queue(state, db, events, "one", "two")
    claim(db, [first], iteration=3)
    mark_applied(db, [second], iteration=3, response="done")

    assert release_claims(db) == 1

    assert [item.id for item in pending(db)] == [first]
    assert status(db, first)["claimed_iteration"] is None
    assert status(db, second)["status"] == "applied"


@pytest.mark.parametrize(
    ("item", "line"),
    [
        (HumanInput(kind="override", action="close", task_id=4), "override: close task #4"),
        (
            HumanInput(kind="override", action="skip", task_id=2, text="flaky"),
            "override: skip task #2 (flaky)",
        ),
        (
            HumanInput(kind="override", action="constraint", text="no new deps"),
            "override: add constraint: no new deps",
        ),
        (HumanInput(kind="correction", text="use\n  pathlib"), "correction: use pathlib"),
        (
            HumanInput(kind="spec_change", mode="amend", text="Add TOML."),
            "spec change (amend): Add TOML.",
        ),
        (HumanInput(kind="approve", target=3), "approve: plan of iteration 3"),
        (
            HumanInput(kind="reject", target=5, text="too risky"),
            "reject: plan of iteration 5 (too risky)",
        ),
        (HumanInput(kind="pause"), "pause"),
        (HumanInput(kind="stop", text="going home"), "stop (going home)"),
    ],
)
def test_describe_renders_one_line(item: HumanInput, line: str) -> None:
    assert describe(item) == line


def test_describe_clips_long_text() -> None:
    line = describe(HumanInput(kind="correction", text="word " * 500))
    assert "\n" not in line
    assert len(line) < 400
    assert line.endswith("…")


# --- crash recovery ---------------------------------------------------------


def test_file_stranded_before_its_row_is_recorded_is_ingested(
    state: Path, db: Database, events: Events
) -> None:
    drop(state, ".claimed/hint.md", "use pathlib")  # died right after the claim

    report = ingest(state, db, events)

    assert len(report.accepted) == 1
    assert [item.source_file for item in pending(db)] == ["hint.md"]
    assert regular_files(state / "inbox" / ".claimed") == []
    assert regular_files(state / "inbox" / "processed") == ["hint.md"]


def test_file_stranded_after_its_row_is_recorded_is_not_recorded_twice(
    state: Path, db: Database, events: Events
) -> None:
    drop(state, "hint.md", "use pathlib")
    ingest(state, db, events)
    # Recreate the moment after the insert committed and before the file moved on.
    os.rename(state / "inbox" / "processed" / "hint.md", state / "inbox" / ".claimed" / "hint.md")

    report = ingest(state, db, events)

    assert report.accepted == []
    assert len(rows(db)) == 1
    assert regular_files(state / "inbox" / ".claimed") == []
    assert regular_files(state / "inbox" / "processed") == ["hint.md"]
    assert len(emitted(db, "inbox.recovered")) == 1


def test_recover_claimed_files_says_where_each_went(
    state: Path, db: Database, events: Events
) -> None:
    drop(state, "done.md", "recorded already")
    ingest(state, db, events)
    os.rename(state / "inbox" / "processed" / "done.md", state / "inbox" / ".claimed" / "done.md")
    drop(state, ".claimed/fresh.md", "never recorded")
    drop(state, ".claimed/bad.json", "{")
    drop(state, "fresh.md", "a newer file with the same name")

    moved = recover_claimed_files(state, db)

    assert sorted(moved) == sorted(
        [
            state / "inbox" / "processed" / "done.md",
            state / "inbox" / "fresh-1.md",
            state / "inbox" / "bad.json",
        ]
    )
    assert (state / "inbox" / "fresh.md").read_text() == "a newer file with the same name"
    assert len(rows(db)) == 1


def test_same_name_with_new_content_is_not_mistaken_for_recorded(
    state: Path, db: Database, events: Events
) -> None:
    drop(state, "hint.md", "first advice")
    ingest(state, db, events)
    drop(state, ".claimed/hint.md", "different advice")

    ingest(state, db, events)

    assert [item.payload.text for item in pending(db)] == ["first advice", "different advice"]
    assert regular_files(state / "inbox" / "processed") == ["hint-1.md", "hint.md"]


def test_a_file_of_exactly_256_kib_is_accepted(state: Path, db: Database, events: Events) -> None:
    drop(state, "long.txt", "x" * (256 * 1024))

    report = ingest(state, db, events)

    assert len(report.accepted) == 1


def test_soda_written_files_need_no_settling(tmp_path: Path) -> None:
    from soda.events import Events
    from soda.store import open_db

    db = open_db(tmp_path / "soda.db")
    write_input(tmp_path, HumanInput(kind="correction", text="now"))
    (tmp_path / "inbox" / "notes.md").write_text("still typing")
    report = ingest(tmp_path, db, Events(db), settle_seconds=60)
    assert len(report.accepted) == 1
    assert report.skipped == ["notes.md"]


# --- routing ----------------------------------------------------------------

EXPECTED_ROUTES = {
    ("correction", None): Route.ORIENT,
    ("override", "prioritise"): Route.ORIENT,
    ("override", "constraint"): Route.ORIENT,
    ("override", "close"): Route.SENSE,
    ("override", "reopen"): Route.SENSE,
    ("override", "skip"): Route.SENSE,
    ("spec_change", None): Route.SENSE,
    ("approve", None): Route.VERDICT,
    ("reject", None): Route.VERDICT,
    ("pause", None): Route.CONTROL,
    ("resume", None): Route.CONTROL,
    ("stop", None): Route.CONTROL,
    ("cancel", None): Route.CONTROL,
    ("plan_edit", None): Route.EDIT,
    ("answer", None): Route.ANSWER,
}


def test_every_kind_and_action_the_contract_admits_has_exactly_one_route() -> None:
    assert contract_keys() == EXPECTED_ROUTES.keys() == ROUTES.keys()
    assert dict(ROUTES) == EXPECTED_ROUTES


@pytest.mark.parametrize(("kind", "action"), sorted(EXPECTED_ROUTES, key=str))
def test_route_of_a_valid_input(kind: str, action: str | None) -> None:
    fields: dict[str, Any] = {"kind": kind, "text": "words", "task_id": 4, "target": 2}
    if action is not None:
        fields["action"] = action
    if kind == "plan_edit":
        fields["plan"] = {"intent": "-", "approach": "-", "tasks": []}
    item = HumanInput.model_validate(fields)
    assert route(item) is EXPECTED_ROUTES[(kind, action)]


def test_action_matters_only_for_an_override() -> None:
    item = HumanInput(kind="correction", text="close it", action="close", task_id=4)
    assert route(item) is Route.ORIENT


@pytest.mark.parametrize(
    "fields", [{"kind": "nap"}, {"kind": "override", "task_id": 4}, {"kind": ""}]
)
def test_an_unroutable_input_is_impossible_by_contract(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        HumanInput.model_validate(fields)


# --- HumanQueue -------------------------------------------------------------


@pytest.fixture
def human(state: Path, db: Database, events: Events) -> HumanQueue:
    return HumanQueue(state, db, events)


def test_take_cancel_takes_only_cancels_from_files_in_the_inbox(
    state: Path, db: Database, human: HumanQueue
) -> None:
    drop(state, "hint.md", "use pathlib", age=20)
    drop(state, "stop-it.json", {"kind": "cancel"}, age=10)

    assert human.take_cancel(5) is True

    cancel, hint = sorted(rows(db), key=lambda row: row["kind"])
    assert (cancel["status"], cancel["applied_iteration"]) == ("applied", 5)
    assert cancel["response"] == "cancelled the running plan"
    assert hint["status"] == "pending"
    assert emitted(db, "act.cancelled") == [{"input": cancel["id"]}]
    assert human.take_cancel(6) is False


def test_take_verdict_answers_only_its_own_iteration(
    state: Path, db: Database, human: HumanQueue
) -> None:
    drop(state, "yes.json", {"kind": "approve", "target": 3}, age=20)
    drop(state, "no.md", "---\nkind: reject\ntarget: 4\n---\ntoo risky\n", age=10)

    assert human.take_verdict(9) is None
    approved, reason = human.take_verdict(4) or (None, "")
    assert approved is False and reason.endswith(" by a person: too risky")
    assert human.take_verdict(4) is None
    assert human.take_verdict(3, noun="merge") == (True, "approved by a person: approved")

    responses = {row["kind"]: (row["applied_iteration"], row["response"]) for row in rows(db)}
    assert responses == {"reject": (4, "plan rejected"), "approve": (3, "merge approved")}


def test_take_verdict_reads_a_file_written_a_moment_ago(state: Path, human: HumanQueue) -> None:
    drop(state, "approve.md", "---\nkind: approve\ntarget: 2\n---\n", age=0)
    assert human.take_verdict(2) == (True, "approved by a person: approved")


def test_take_control_while_idle(state: Path, db: Database, human: HumanQueue) -> None:
    for age, kind in enumerate(["resume", "cancel", "pause"]):
        drop(state, f"{kind}.json", {"kind": kind}, age=30 - age)
    drop(state, "hint.md", "use pathlib")
    human.ingest()

    taken = human.take_control_while_idle(next_iteration=8)

    assert taken == [
        ControlAction("resume", "resumed"),
        ControlAction("cancel", "no plan was running; nothing to cancel"),
        ControlAction("pause", "paused: no iterations until resume"),
    ]
    assert [item.kind for item in human.pending()] == ["correction"]
    assert {row["applied_iteration"] for row in rows(db) if row["kind"] != "correction"} == {8}
    assert [event["kind"] for event in emitted(db, "control")] == ["resume", "cancel", "pause"]
    assert human.paused()


def test_apply_at_sense_and_what_orient_sees(
    state: Path, db: Database, events: Events, human: HumanQueue
) -> None:
    tracker = SqliteTracker(db, "spec")
    task = tracker.create("parse flags")
    spec = state / "SPEC.md"
    spec.write_text("# Spec\n")
    inputs = [
        {"kind": "spec_change", "text": "Also --json."},
        {"kind": "override", "action": "close", "task_id": task.id, "text": "done by hand"},
        {"kind": "override", "action": "reopen", "task_id": 9999},
        {"kind": "override", "action": "constraint", "text": "no new deps"},
        {"kind": "correction", "text": "use argparse"},
        {"kind": "approve", "target": 1},
        {"kind": "pause"},
    ]
    for age, item in enumerate(inputs):
        drop(state, f"{age}.json", item, age=60 - age)
    human.ingest()
    learned: list[tuple[list[str], str, int | None]] = []

    done = human.apply_at_sense(
        tracker, spec, lambda texts, agent, it: learned.append((texts, agent, it)), 3
    )

    assert done == [
        "spec amended in SPEC.md",
        f"closed task #{task.id}",
        "could not apply: no task 9999 in milestone spec",
    ]
    assert spec.read_text() == "# Spec\n\nAlso --json.\n"
    assert tracker.show(task.id).status == "closed"
    assert learned == [(["Constraint from a person: no new deps"], "human", None)]
    assert [item.payload.text for item in human.for_orient()] == ["no new deps", "use argparse"]
    assert len(emitted(db, "human.applied")) == 3
    assert human.pending_count() == 4
    assert human.paused()
