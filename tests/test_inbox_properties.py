"""Whatever lands in the inbox, ingest neither raises nor loses a file: each one ends
in exactly one of processed/ or rejected/, and every rejection explains itself."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any, get_args

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from soda.contracts import HumanKind
from soda.events import Events
from soda.human.files import ingest
from soda.store.db import open_db

EXTENSIONS = [".json", ".md", ".txt", "", ".JSON", ".pdf", ".yaml"]
FIELDS = ["text", "action", "task_id", "target", "mode", "colour"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
kinds = st.sampled_from([*get_args(HumanKind), "nap", ""])
inputs_with_kind = st.fixed_dictionaries(
    {"kind": kinds},
    optional={name: json_values | st.integers(-5, 5) | st.text(max_size=20) for name in FIELDS},
)


def as_json(value: Any) -> bytes:
    return json.dumps(value).encode()


def front_matter(fields: dict[str, Any]) -> bytes:
    header = "".join(f"{key}: {value}\n" for key, value in fields.items())
    return f"---\n{header}---\n{fields.get('text', '')}".encode()


contents = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=300).map(str.encode),
    json_values.map(as_json),
    inputs_with_kind.map(as_json),
    inputs_with_kind.map(front_matter),
)
files = st.lists(st.tuples(st.sampled_from(EXTENSIONS), contents), min_size=1, max_size=6)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(files=files)
def test_every_file_ends_processed_or_rejected(files: list[tuple[str, bytes]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "state"
        inbox = state / "inbox"
        inbox.mkdir(parents=True)
        db = open_db(state / "soda.db")
        accepted, rejected = [], []
        # Two rounds with the same names: the second lands on taken names.
        for _ in range(2):
            for number, (ext, content) in enumerate(files):
                (inbox / f"input-{number}{ext}").write_bytes(content)
            report = ingest(state, db, Events(db), settle_seconds=0)
            accepted += report.accepted
            rejected += report.rejected

        assert [p for p in inbox.iterdir() if p.is_file() and not p.name.startswith(".")] == []
        assert list((inbox / ".claimed").iterdir()) == []
        processed = list((inbox / "processed").iterdir())
        kept = [p for p in (inbox / "rejected").iterdir() if p.suffix != ".reason"]
        assert len(processed) + len(kept) == 2 * len(files)
        assert len(processed) == len(accepted) == db["human_inputs"].count
        assert sorted(kept) == sorted(rejected)
        for path in kept:
            reason = Path(f"{path}.reason").read_text()
            assert reason.count("\n") == 1
            assert reason.startswith("input-")
        db.close()
