"""cargo test's per-test results, read from libtest's text output (stdout and
stderr together): cargo's `Running` and `Doc-tests` lines say which target the
`test NAME ... ok` lines after them belong to. Ids are `bin/src/lib.rs::mod::test`,
and `bin/doctest::src/x.rs - item` for a doctest, without the line number libtest
gives it (which changes whenever a line is added above). The `Parsed` shape and
its helpers are `soda.gate.reports`'.
"""

from __future__ import annotations

import re
from pathlib import Path

from soda.gate.reports import Parsed, _Results, _unreadable, excerpt

_RUNNING = re.compile(
    r"^\s*Running (?:unittests )?(\S+) \((?:.*/)?([^/()]+?)(?:-[0-9a-f]{16})?(?:\.exe)?\)"
)
_DOC_TESTS = re.compile(r"^\s*Doc-tests (\S+)")
_RESULT = re.compile(r"^test (.+?) \.\.\. (ok|FAILED|ignored(?:, .*)?)$")
_STDOUT = re.compile(r"^---- (.+?) stdout ----$")
_DOC_LINE = re.compile(r" \(line \d+\)( - compile fail| - should panic| - compile)?$")


def _doc_line(name: str) -> int:
    found = re.search(r" \(line (\d+)\)", name)
    return int(found.group(1)) if found else 0


def doctest_id(name: str) -> str:
    """A doctest's name without its line number: `src/x.rs - f (line 35)` is
    `src/x.rs - f`, so a line added above does not rename it."""
    return _DOC_LINE.sub(lambda m: m.group(1) or "", name)


def parse_libtest(path: Path) -> Parsed | str:
    """`cargo test`'s output (stdout and stderr together): cargo's `Running` and
    `Doc-tests` lines say which target the following `test NAME ... ok` lines
    belong to; a failure's text is its `---- NAME stdout ----` section."""
    problem = _unreadable(path)
    if problem:
        return problem
    results = _Results()
    target, seen = "", False
    pending: dict[str, str] = {}
    section: list[str] | None = None
    texts: dict[str, str] = {}
    docs: list[tuple[str, int, str, str]] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if (running := _RUNNING.match(line)) is not None:
            target, section = f"{running.group(2)}/{running.group(1)}", None
            _flush(results, pending, texts, docs)
            continue
        if (doc := _DOC_TESTS.match(line)) is not None:
            target, section = f"{doc.group(1)}/doctest", None
            _flush(results, pending, texts, docs)
            continue
        if (result := _RESULT.match(line)) is not None and target:
            seen = True
            name = result.group(1)
            outcome = {"ok": "passed", "FAILED": "failed"}.get(result.group(2), "skipped")
            if target.endswith("/doctest"):  # named once all of the target's are in
                docs.append((f"{target}::{doctest_id(name)}", _doc_line(name), name, outcome))
            else:
                pending[name] = f"{target}::{name}"
                results.add(f"{target}::{name}", outcome)
            continue
        if (started := _STDOUT.match(line)) is not None:
            section = []
            texts[started.group(1)] = ""
            current = started.group(1)
            continue
        if section is not None:
            if line.strip() == "failures:" or line.startswith("test result:"):
                section = None
                continue
            texts[current] = texts[current] + line + "\n"
    _flush(results, pending, texts, docs)
    if not seen:
        return "cargo printed no test result (did the build fail?)"
    return results.parsed()


def _flush(
    results: _Results,
    pending: dict[str, str],
    texts: dict[str, str],
    docs: list[tuple[str, int, str, str]],
) -> None:
    """Add the target's doctests and attach each failure's text (printed after
    the results) to its id. Doctests sharing an id (two examples on one item, or
    the crate's own docs, which name no item) are numbered in the order of their
    lines, not in the order they finished (they run in parallel): `#2` is the
    second example in the file, whatever line it moved to."""
    counts: dict[str, int] = {}
    for base, _, name, outcome in sorted(docs, key=lambda doc: (doc[0], doc[1])):
        counts[base] = counts.get(base, 0) + 1
        pending[name] = base if counts[base] == 1 else f"{base} #{counts[base]}"
        results.add(pending[name], outcome)
    docs.clear()
    for name, test_id in pending.items():
        if results.outcomes.get(test_id) == "failed" and name in texts:
            results.excerpts[test_id] = excerpt(_panic_first(texts[name]))
    pending.clear()
    texts.clear()


def _panic_first(text: str) -> str:
    text = text.split("\nstack backtrace:")[0]
    lines = [ln for ln in text.splitlines() if ln.strip()]
    start = next((i for i, ln in enumerate(lines) if "panicked at" in ln), 0)
    return "\n".join(lines[start:])
