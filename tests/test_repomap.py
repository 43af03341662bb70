"""soda.tools.repomap (the repository map), soda.tools.symbols (what it shows of a
Python file) and soda.tools.treemap (the map of a commit), on real git repositories."""

from __future__ import annotations

from pathlib import Path

import pytest
from git import Repo
from pydantic import ValidationError

from soda.config import Config, ContextConfig
from soda.tools import Sandbox, read_only_tools
from soda.tools.repomap import CHARS_PER_TOKEN, rank, repo_map
from soda.tools.symbols import SymbolCache, python_symbols
from soda.tools.treemap import TreeMaps
from tests.conftest import git

CORE = '''\
"""The core."""
import asyncio


class Engine(Base, metaclass=Meta):
    def run(self, steps: int) -> None: ...
    def stop(self): ...
    def _private(self): ...


def compute(x: int, *, scale: float = 1.0) -> float:
    return x * scale


async def fetch(url):
    await asyncio.sleep(0)


def _helper():
    pass


LIMIT = 3
'''

FILES = {
    "README.md": "# project\n",
    "pyproject.toml": "[project]\nname = 'pkg'\n",
    ".gitignore": "node_modules/\n.venv/\nbuild/\n*.gen.py\nstate/\n",
    "broken.py": "def broken(:\n",
    "src/pkg/__init__.py": "",
    "src/pkg/core.py": CORE,
    "src/pkg/util.py": "def helper(a, b):\n    return a + b\n",
    "src/pkg/deep/inner.py": "class Inner:\n    pass\n",
    "tests/test_core.py": "def test_compute():\n    assert True\n",
    "docs/guide.md": "# guide\n",
}
IGNORED = {
    "node_modules/left/index.js": "module.exports = 1\n",
    ".venv/lib/site.py": "def venv_only(): ...\n",
    "build/out.py": "def built(): ...\n",
    "src/pkg/table.gen.py": "def generated(): ...\n",
    "state/soda.db": "secret\n",
}
UNTRACKED = {"src/pkg/fresh.py": "def fresh() -> int:\n    return 1\n"}

ORDER = [
    "README.md",
    "pyproject.toml",
    "src/pkg/core.py",
    "src/pkg/fresh.py",
    "src/pkg/util.py",
    "src/pkg/__init__.py",
    "src/pkg/deep/inner.py",
    "broken.py",
    ".gitignore",
    "tests/test_core.py",
    "docs/guide.md",
]
"""The documented ranking: front door; source (shallow first, more symbols first);
other code; other files; tests and docs."""


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    write(root, FILES)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "first")
    write(root, IGNORED)
    write(root, UNTRACKED)
    return root


def paths_in(text: str) -> list[str]:
    """The files a map shows, in order (symbol lines are indented; the last line is
    the footer)."""
    return [line.split("  [")[0] for line in text.split("\n")[:-1] if not line.startswith(" ")]


def test_map_shows_files_with_their_symbols_in_ranked_order(repo: Path) -> None:
    text = repo_map(repo, 2000, cache=SymbolCache())
    assert paths_in(text) == ORDER
    assert text.split("\n")[-1] == f"[{len(ORDER)} files, all shown]"
    block = text.split("src/pkg/core.py\n", 1)[1].split("\nsrc/pkg/fresh.py", 1)[0]
    assert block.split("\n") == [
        "  class Engine(Base, metaclass=Meta): run, stop",
        "  def compute(x: int, *, scale: float=1.0) -> float",
        "  async def fetch(url)",
    ]
    assert "  def fresh() -> int" in text.split("\n")  # untracked, not ignored
    # A file that does not parse is listed without symbols.
    assert text.split("broken.py\n", 1)[1].startswith(".gitignore\n")


def test_ignored_files_are_absent_everywhere(repo: Path) -> None:
    text = repo_map(repo, 5000, cache=SymbolCache())
    box = read_only_tools(Sandbox(repo, extra_deny=[repo / "state"]))
    listed = box.call("list_files", {"path": None, "pattern": None}).content
    found = box.call("search_text", {"pattern": "def |module", "path": None, "glob": None})
    for rel in IGNORED:
        assert rel not in text
        assert rel not in listed
        assert rel not in found.content
    assert "src/pkg/fresh.py" in listed and "src/pkg/fresh.py:1:" in found.content


@pytest.mark.parametrize("budget", [30, 45, 60, 80, 120, 300])
def test_map_fits_its_budget_and_keeps_the_best_files(repo: Path, budget: int) -> None:
    text = repo_map(repo, budget, cache=SymbolCache())
    assert len(text) <= budget * CHARS_PER_TOKEN
    shown = paths_in(text)
    assert shown == ORDER[: len(shown)]
    left_out = len(ORDER) - len(shown)
    footer = text.split("\n")[-1]
    if left_out:
        assert footer.startswith(f"[{left_out} of {len(ORDER)} files left out;")
    else:
        assert footer == f"[{len(ORDER)} files, all shown]"


def test_a_file_whose_symbols_do_not_fit_is_shown_by_path(repo: Path) -> None:
    text = repo_map(repo, 45, cache=SymbolCache())
    assert "src/pkg/core.py  [3 symbols]" in text.split("\n")


def test_a_second_map_is_served_from_the_cache(repo: Path, tmp_path: Path) -> None:
    cache = SymbolCache()
    first = repo_map(repo, 2000, cache=cache)
    python_files = [p for p in ORDER if p.endswith(".py")]
    assert cache.parses == len(python_files)
    assert repo_map(repo, 2000, cache=cache) == first
    assert cache.parses == len(python_files)
    assert cache.hits >= len(python_files)
    # Another checkout of the same commit: nothing to parse.
    git(repo, "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "other")
    repo_map(tmp_path / "wt", 2000, cache=cache)
    assert cache.parses == len(python_files)
    # One file changed in the work tree: one parse, and the map shows the change.
    (repo / "src" / "pkg" / "util.py").write_text("def helper2(a):\n    return a\n")
    assert "  def helper2(a)" in repo_map(repo, 2000, cache=cache).split("\n")
    assert cache.parses == len(python_files) + 1
    # Committed: its blob id is the id the change was cached under.
    git(repo, "commit", "-q", "-am", "helper2")
    assert "  def helper2(a)" in repo_map(repo, 2000, cache=cache).split("\n")
    assert cache.parses == len(python_files) + 1


def test_files_past_the_cut_are_not_parsed(repo: Path) -> None:
    cache = SymbolCache()
    text = repo_map(repo, 30, cache=cache)
    assert paths_in(text) == ["README.md", "pyproject.toml"]
    # The group the cut fell in (src/pkg/*.py, ranked by their symbols), not the
    # deeper src/pkg/deep/inner.py, nor broken.py or tests/test_core.py.
    assert cache.parses == 4


def test_the_cache_is_bounded() -> None:
    cache = SymbolCache(max_entries=2)
    for n in range(5):
        cache.parse(f"key{n}", b"def f(): ...\n")
    assert len(cache) == 2
    assert cache.get("key0") is None and cache.get("key4") == ("def f()",)


def test_python_symbols() -> None:
    assert python_symbols(CORE.encode()) == (
        "class Engine(Base, metaclass=Meta): run, stop",
        "def compute(x: int, *, scale: float=1.0) -> float",
        "async def fetch(url)",
    )
    assert python_symbols(b"def broken(:\n") == ()
    assert python_symbols(b"x = '\\d'\0") == ()  # a NUL byte: ValueError, not a crash
    long = python_symbols(b"def f(" + b", ".join(b"a%d" % n for n in range(100)) + b"): ...\n")
    assert len(long[0]) <= 100 and long[0].endswith("...")


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("README.md", 0),
        ("setup.py", 0),
        ("docs/README.md", 4),
        ("src/anything/core.py", 1),
        ("lib/x.js", 1),
        ("pkg/sub/mod.py", 1),  # pkg/sub has an __init__.py
        ("pkg/other/mod.py", 2),
        ("bin/tool.py", 2),
        ("setup_helpers.py", 2),
        ("config/settings.yaml", 3),
        ("Dockerfile", 3),
        (".github/workflows/check.py", 3),
        ("tests/test_core.py", 4),
        ("pkg/sub/test_x.py", 4),
        ("conftest.py", 4),
        ("examples/demo.py", 4),
        ("bench/speed.py", 4),
        ("poetry.lock", 5),
        ("vendor/lib.py", 5),
        ("static/logo.png", 5),
    ],
)
def test_rank(path: str, expected: int) -> None:
    assert rank(path, packages={"pkg/sub"}) == expected


def test_the_tool_takes_a_path_prefix_through_the_sandbox(repo: Path) -> None:
    box = read_only_tools(Sandbox(repo, extra_deny=[repo / "state"]))
    deep = box.call("repo_map", {"path": "src/pkg/deep"})
    assert deep.content == "src/pkg/deep/inner.py\n  class Inner\n[1 file, all shown]"
    assert paths_in(box.call("repo_map", {"path": None}).content) == ORDER
    for bad in (".git", "../repo", "state", "nope"):
        assert box.call("repo_map", {"path": bad}).is_error, bad


def test_the_budget_comes_from_the_toolbox(repo: Path) -> None:
    box = read_only_tools(Sandbox(repo), repo_map_tokens=30)
    assert "about 30 tokens" in box.tools["repo_map"].spec.description
    text = box.call("repo_map", {"path": None}).content
    assert len(text) <= 30 * CHARS_PER_TOKEN and "files left out" in text
    default = read_only_tools(Sandbox(repo))
    tokens = Config().context.repo_map_tokens
    assert f"about {tokens} tokens" in default.tools["repo_map"].spec.description


def test_the_config_key_has_a_default_and_a_range() -> None:
    assert Config().context.repo_map_tokens == 2000
    for bad in (0, 199, 50_001):
        with pytest.raises(ValidationError):
            ContextConfig(repo_map_tokens=bad)


def test_outside_git_the_map_walks_the_tree(tmp_path: Path) -> None:
    write(tmp_path, {"pkg/mod.py": "def f(a): ...\n", "build/out.py": "def g(): ...\n"})
    text = repo_map(tmp_path, 500, cache=SymbolCache())
    assert text == "build/out.py\n  def g()\npkg/mod.py\n  def f(a)\n[2 files, all shown]"
    assert repo_map(tmp_path / "build", 500, cache=SymbolCache()).startswith("out.py\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert repo_map(empty, 500) == "(no files)"


# --- the map of a commit (soda.tools.treemap) ----------------------------------------


def commit_all(root: Path, message: str) -> str:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD^{tree}")


def test_a_commits_map_is_the_tools_map_of_a_clean_checkout(repo: Path, tmp_path: Path) -> None:
    git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "clean"), "HEAD")
    tool = repo_map(tmp_path / "clean", 2000, cache=SymbolCache()).split("\n")
    tree = git(repo, "rev-parse", "HEAD^{tree}")
    mapped = TreeMaps(SymbolCache()).map(Repo(repo), tree, 2000)
    # Committed files only: the untracked and ignored ones are not in the tree.
    assert mapped.listing.split("\n") == tool[:-1]
    assert paths_in(mapped.listing + "\n") == [p for p in ORDER if p != "src/pkg/fresh.py"]
    assert mapped.counts == f"[{len(ORDER) - 1} files, all shown]"
    assert mapped.prompt_parts() == (mapped.listing, mapped.counts)
    # The same tree, another process's maps: the same text.
    assert TreeMaps(SymbolCache()).map(Repo(repo), tree, 2000) == mapped


def test_a_file_past_the_cut_changes_the_count_not_the_listing(repo: Path) -> None:
    maps = TreeMaps(SymbolCache())
    first = maps.map(Repo(repo), commit_all(repo, "fresh"), 60)  # every file of ORDER
    assert first.counts.startswith("[") and "files left out; call repo_map" in first.counts
    assert "tests/test_core.py" not in first.listing  # past the cut
    shown = paths_in(first.listing + "\n")
    for n in range(3):  # docs and tests rank last: never reached
        write(repo, {f"docs/page_{n}.md": "# page\n", f"tests/test_{n}.py": "def test(): ...\n"})
        later = maps.map(Repo(repo), commit_all(repo, f"docs {n}"), 60)
        assert later.listing == first.listing
        assert f" of {len(ORDER) + 2 * n + 2} files left out" in later.counts
    assert (maps.trees_read, maps.listings) == (1, 1)  # moved forward, not read again
    # A file in a group the listing reached: built again, from the kept files.
    write(repo, {"src/pkg/aaa.py": "def first_of_all(x): ...\n"})
    changed = maps.map(Repo(repo), commit_all(repo, "aaa"), 60)
    assert changed.listing != first.listing and (maps.trees_read, maps.listings) == (1, 2)
    assert paths_in(changed.listing + "\n")[: len(shown)] != shown
    # A package made elsewhere ranks its modules as source: built again.
    write(repo, {"tools/__init__.py": "", "tools/run.py": "def run(): ...\n"})
    maps.map(Repo(repo), commit_all(repo, "tools package"), 60)
    assert (maps.trees_read, maps.listings) == (1, 3)
    # Every map, however it was reached, is the map of its tree.
    tree = git(repo, "rev-parse", "HEAD^{tree}")
    assert maps.map(Repo(repo), tree, 60) == TreeMaps(SymbolCache()).map(Repo(repo), tree, 60)


def test_a_commits_map_leaves_out_what_the_tools_never_show(repo: Path) -> None:
    write(repo, {"node_modules/pkg/index.js": "x\n", "lib/real.py": "def real(): ...\n"})
    (repo / "lib" / "link.py").symlink_to("real.py")
    git(repo, "add", "-f", "node_modules", "lib")
    git(repo, "commit", "-q", "-m", "vendored and linked")
    tree = git(repo, "rev-parse", "HEAD^{tree}")
    listing = TreeMaps(SymbolCache()).map(Repo(repo), tree, 2000).listing.split("\n")
    assert "node_modules/pkg/index.js" not in listing
    assert "lib/link.py" in listing  # a symlink is listed by its path alone
    assert not listing[listing.index("lib/link.py") + 1].startswith("  ")  # no symbols
    assert "  def real()" in listing
