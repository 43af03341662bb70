"""A file's bytes -> a checked `HumanInput`, or a `Rejection` saying, for a
person, what is wrong. Also the typed view of a stored row (`QueuedInput`).

JSON files hold one `human_input` object; text files (`.md`, `.txt`, none) are
a correction, with an optional `---` front matter setting other fields. Bad
content is never an exception other than `Rejection`.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from soda.contracts import HumanInput, HumanKind, IterationPlan, validate
from soda.contracts.plan_dag import plan_problems
from soda.errors import StructuralError, Violation
from soda.store.db import dumps

MAX_BYTES = 256 * 1024
MAX_JSON_DEPTH = 64
"""Nesting levels a person's JSON may have: no input or plan comes near, and
deeper input is refused before the parser recurses into it."""
STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
KINDS: tuple[str, ...] = get_args(HumanKind)
TEXT_SUFFIXES = frozenset({".txt", ".md", ""})
INT_FIELDS = frozenset({"task_id", "target"})
FRONT_MATTER_START = re.compile(r"---[ \t]*(?:\r?\n|\Z)")
FRONT_MATTER = re.compile(
    r"\A---[ \t]*\r?\n(?P<header>.*?)^---[ \t]*\r?$\n?", re.DOTALL | re.MULTILINE
)


class Rejection(Exception):
    """A file's content is unusable; `problem` says why, for a person."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(problem)


@dataclass(frozen=True)
class QueuedInput:
    """One row of the human-input queue, with its payload checked and typed."""

    id: int
    kind: str
    payload: HumanInput
    received_at: str
    source_file: str | None


def queued(
    row_id: int, kind: str, payload_json: str, received_at: str, source_file: str | None
) -> QueuedInput:
    """A stored row, typed; a payload that no longer checks is structural."""
    try:
        payload = HumanInput.model_validate_json(payload_json)
    except ValueError as exc:
        raise StructuralError(f"human_inputs row {row_id} holds an invalid payload") from exc
    return QueuedInput(row_id, kind, payload, received_at, source_file)


def read(path: Path) -> bytes:
    """The bytes of the regular file at `path`, or a `Rejection`.

    Never blocks and never follows a link: the entry is looked at with lstat, and
    anything but a regular file (a symlink, directory, FIFO, socket or device) is
    rejected by what it is; the open (O_NONBLOCK | O_NOFOLLOW) is checked again
    with fstat, in case the entry was swapped in between.
    """
    try:
        _require_regular(path, os.lstat(path).st_mode)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY)
    except OSError as exc:
        raise Rejection(f"cannot be read: {exc.strerror}") from exc
    try:
        with os.fdopen(fd, "rb") as fh:
            _require_regular(path, os.fstat(fh.fileno()).st_mode)
            raw = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise Rejection(f"cannot be read: {exc.strerror}") from exc
    if len(raw) > MAX_BYTES:
        raise Rejection(f"too large: over {MAX_BYTES // 1024} KiB")
    return raw


def _require_regular(path: Path, mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    if stat.S_ISLNK(mode):
        try:
            target = f" to {clip(display(os.readlink(path)), 200)}"
        except OSError:
            target = ""
        raise Rejection(
            f"a symbolic link{target}; soda never follows links: put the file itself in the inbox"
        )
    if stat.S_ISDIR(mode):
        raise Rejection("a directory; put each input in the inbox as a file of its own")
    if stat.S_ISFIFO(mode):
        raise Rejection("a FIFO (named pipe), not a regular file")
    if stat.S_ISSOCK(mode):
        raise Rejection("a socket, not a regular file")
    raise Rejection("a device, not a regular file")


def parse(name: str, raw: bytes) -> HumanInput:
    """The checked input a file holds, or a `Rejection` saying what is wrong."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise Rejection("file name is not valid UTF-8; rename it") from exc
    suffix = Path(name).suffix.lower()
    if suffix != ".json" and suffix not in TEXT_SUFFIXES:
        raise Rejection(f"unsupported extension {suffix!r}: use .json, .md, .txt or none")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise Rejection(f"not UTF-8: invalid byte at offset {exc.start}") from exc
    if not text.strip():
        raise Rejection("file is empty")
    data = _json_document(text) if suffix == ".json" else _text_document(text)
    return _checked(data)


def document(item: HumanInput) -> dict[str, Any]:
    """An input as JSON: fields it does not use left out, but nothing inside a
    field (an edited plan's null task ids are part of the plan)."""
    return {k: v for k, v in item.model_dump(mode="json").items() if v is not None}


def payload_json(item: HumanInput) -> str:
    """The stored form of an input (`human_inputs.payload_json`)."""
    payload = dumps(document(item))
    try:
        payload.encode("utf-8")
    except UnicodeEncodeError as exc:
        # JSON may spell a lone surrogate (\ud800), which no UTF-8 column can hold.
        raise Rejection("text contains an unpaired surrogate escape (\\ud800-\\udfff)") from exc
    return payload


def json_depth(text: str) -> int:
    """How deeply `text`'s arrays and objects nest (strings skipped): checked
    before `json.loads`, whose recursion on deep input is slow and, near the
    interpreter's limit, breaks whatever else runs at that depth."""
    depth = deepest = 0
    for char in STRINGS.sub("", text):
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def too_deep(text: str) -> str | None:
    """Why `text` is refused as JSON for its nesting, or None."""
    if json_depth(text) > MAX_JSON_DEPTH:
        return f"nested deeper than {MAX_JSON_DEPTH} levels"
    return None


def _json_document(text: str) -> Any:
    deep = too_deep(text)
    if deep is not None:
        raise Rejection(f"invalid JSON: {deep}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise Rejection(
            f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from exc
    except (ValueError, RecursionError) as exc:  # e.g. a 5000-digit number, deep nesting
        raise Rejection(f"invalid JSON: {exc}") from exc


def _text_document(text: str) -> dict[str, Any]:
    """Plain text is a correction; an optional `---` front matter sets other fields."""
    if not FRONT_MATTER_START.match(text):
        return {"kind": "correction", "text": text.strip()}
    match = FRONT_MATTER.match(text)
    if match is None:
        raise Rejection("front matter opened with '---' on line 1 is never closed")
    data: dict[str, Any] = {"kind": "correction", **_front_matter(match["header"])}
    body = text[match.end() :].strip()
    if body:
        if data.get("text"):
            raise Rejection("text given both in the front matter and in the body")
        data["text"] = body
    elif data["kind"] in ("correction", "spec_change") and not data.get("text"):
        raise Rejection(f"empty text: a {clip(data['kind'])} needs words below the header")
    return data


def _front_matter(header: str) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for number, line in enumerate(header.splitlines(), start=2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition(":")
        key = key.strip()
        if not sep or not key:
            raise Rejection(f"front matter line {number} is not 'key: value': {clip(line)!r}")
        if key in fields:
            raise Rejection(f"front matter line {number} repeats key {clip(key)!r}")
        fields[key] = _scalar(key, value.strip())
    return fields


def _scalar(key: str, value: str) -> Any:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    if not value:
        return None
    # Bounded digits: int() refuses very long strings, and no task id is that long.
    if key in INT_FIELDS and re.fullmatch(r"[+-]?\d{1,18}", value):
        return int(value)
    return value


def _checked(data: Any) -> HumanInput:
    if isinstance(data, dict):
        if "kind" in data and data["kind"] not in KINDS:
            raise Rejection(f"unknown kind {clip(data['kind'])!r}; known: {', '.join(KINDS)}")
        text = data.get("text")
        if isinstance(text, str) and not text.strip():
            raise Rejection("text is empty")
    try:
        result = validate("human_input", data)
    except RecursionError as exc:
        raise Rejection("JSON is nested too deeply") from exc
    if isinstance(result, Violation):
        raise Rejection(f"human_input contract violated at {result.path}: {result.message}")
    if result.plan is not None:
        _check_plan(result.plan)
    return result


def _check_plan(plan: IterationPlan) -> None:
    """An edited plan's own shape (keys, dependencies, cycles); its Trace tasks and
    size are checked against the database when the approval takes it."""
    own_tasks = {task.task_id for task in plan.tasks if task.task_id is not None}
    problems = plan_problems(plan, own_tasks, max_tasks=len(plan.tasks))
    if not plan.tasks:
        problems.append("it has no tasks (to run nothing, reject the plan)")
    if problems:
        raise Rejection(f"edited plan refused: {'; '.join(problems)}")


def clip(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[:limit] + "..."


def one_line(text: str, limit: int | None = None) -> str:
    line = " ".join(text.split())
    return line if limit is None or len(line) <= limit else line[: limit - 1] + "…"


def display(name: str) -> str:
    # File names may hold newlines or undecodable bytes; reasons and events must not.
    return name if name.isprintable() else repr(name)
