"""The repository map and .gitignore-aware search on a real, large repository.

Clones the repository (`git clone --shared`, into a temporary directory: nothing
of it lands in this repository), adds an ignored build tree of generated files
(`build/` is in sympy's .gitignore; the kind of copy `setup.py build` leaves,
each file mentioning the common identifier), and prints:

- the repository map at the default budget ([context] repo_map_tokens): time
  cold (empty cache: every file the ranking reaches is parsed) and warm (the
  same tree again), files parsed, and its size in tokens against the budget;
- search_text for a common identifier (stops at the match cap) and for a rare
  one (a scan of the whole tree), and list_files, before and after .gitignore
  awareness: "before" is the walk this change replaced (every directory but
  the noise ones, each line matched), "after" is git's listing. For each, the
  share of hits that came from the ignored build tree.

    python bench/repo_map.py [REPO] [--generated 20000] [--runs 3]

REPO is a git repository, bare or not, e.g. a clone of github.com/sympy/sympy
(default: the SODA_BENCH_REPO environment variable).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

from soda.config import DEFAULT_REPO_MAP_TOKENS
from soda.tools import Sandbox, listing, read_only_tools, search
from soda.tools.repomap import CHARS_PER_TOKEN, repo_map
from soda.tools.symbols import SymbolCache

DEFAULT_REPO = Path(os.environ.get("SODA_BENCH_REPO", "sympy"))
IGNORED_DIR = "build/lib/generated"
COMMON = "Symbol"
RARE = r"def igcdex\b"


def generate(root: Path, count: int) -> None:
    """`count` ignored files that look like build output of the project."""
    body = "".join(f"from sympy import {COMMON}\nx{n} = {COMMON}('x{n}')\n" for n in range(20))
    for n in range(count):
        directory = root / IGNORED_DIR / f"pkg{n // 500:03}"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"mod{n:05}.py").write_text(body)


@contextmanager
def before() -> Iterator[None]:
    """search_text and list_files as they were: no git listing (the walk), each
    file matched line by line."""
    with (
        mock.patch.object(listing, "git_listing", return_value=None),
        mock.patch.object(search, "_whole_text_regex", return_value=None),
    ):
        yield


def timed(action: Callable[[], str], runs: int) -> tuple[float, str]:
    times, answer = [], ""
    for _ in range(runs):
        started = time.perf_counter()
        answer = action()
        times.append(time.perf_counter() - started)
    return statistics.median(times), answer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", nargs="?", type=Path, default=DEFAULT_REPO)
    parser.add_argument("--generated", type=int, default=20_000, help="ignored files to add")
    parser.add_argument("--runs", type=int, default=3, help="runs per search (median shown)")
    args = parser.parse_args()
    if not args.repo.exists():
        print(
            f"{args.repo} does not exist: pass a clone of a large repository, "
            "e.g. github.com/sympy/sympy (or set SODA_BENCH_REPO)",
            file=sys.stderr,
        )
        return 2
    with tempfile.TemporaryDirectory(prefix="soda-bench-map-") as tmp:
        root = Path(tmp) / "repo"
        subprocess.run(
            ["git", "clone", "-q", "--shared", str(args.repo), str(root)],
            check=True,
        )
        tracked = subprocess.run(
            ["git", "ls-files"], cwd=root, check=True, capture_output=True, text=True
        ).stdout.count("\n")
        generate(root, args.generated)
        print(f"{args.repo}: {tracked} tracked files; {args.generated} ignored in {IGNORED_DIR}/")

        budget = DEFAULT_REPO_MAP_TOKENS
        cache = SymbolCache()
        cold, text = timed(lambda: repo_map(root, budget, cache=cache), 1)
        parsed = cache.parses
        warm, again = timed(lambda: repo_map(root, budget, cache=cache), args.runs)
        assert again == text and cache.parses == parsed, "the warm map parsed again"
        tokens = len(text) / CHARS_PER_TOKEN
        shown = sum(1 for line in text.split("\n")[:-1] if not line.startswith(" "))
        print(
            f"repo map: cold {cold:.2f}s ({parsed} files parsed), warm {warm * 1000:.0f} ms "
            f"(0 parsed); {tokens:.0f} tokens of a {budget} budget, {shown} files shown"
        )
        print(f"  last line: {text.split(chr(10))[-1]}")
        if IGNORED_DIR in text:
            print("  the map shows ignored files!", file=sys.stderr)
            return 1

        box = read_only_tools(Sandbox(root))

        def search(pattern: str) -> str:
            arguments = {"pattern": pattern, "path": None, "glob": None}
            return box.call("search_text", arguments).content

        def listing() -> str:
            return box.call("list_files", {"path": None, "pattern": None}).content

        rows = [
            (f"search_text {COMMON!r}", lambda: search(COMMON)),
            (f"search_text {RARE!r}", lambda: search(RARE)),
            ("list_files", listing),
        ]
        for label, action in rows:
            with before():
                old_s, old = timed(action, args.runs)
            new_s, new = timed(action, args.runs)
            print(
                f"{label}: before {old_s * 1000:.0f} ms ({describe(old)}), "
                f"after {new_s * 1000:.0f} ms ({describe(new)}), {old_s / new_s:.1f}x"
            )
    return 0


def describe(answer: str) -> str:
    lines = [line for line in answer.split("\n") if not line.startswith("[")]
    if lines == ["(no matches)"]:
        return "no matches"
    junk = sum(1 for line in lines if line.startswith(IGNORED_DIR))
    return f"{len(lines)} lines, {junk} from the ignored tree"


if __name__ == "__main__":
    raise SystemExit(main())
