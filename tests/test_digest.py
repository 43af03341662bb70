"""The milestone digest SENSE reads (soda.repo.digest): advanced merge by merge, it
must say exactly what a rebuild from git says, and what git itself says
(`git diff --numstat base tip`, `git rev-list --count`), whatever happened in
between: several merges at once (a crash between a merge and the store's
update), a person resetting or rewriting the branch, renames, quoted and binary
paths, a change of git's settings, and kill -9 in the middle of an update."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

from git import Repo

from soda.config import Config
from soda.loop.sense import SenseInput, code_claims
from soda.repo import digest
from soda.repo.digest import Digest, Row
from soda.repo.objects import commit_info
from soda.store import open_db
from soda.store.digests import DigestRows
from tests.conftest import git

BRANCH = "soda/spec"
EVERYTHING = 10**6


class Milestone:
    """A milestone branch with a worktree of its own, moved by --no-ff merges of
    short task branches (as soda moves it) or by a person."""

    def __init__(self, repo: Path, tmp: Path) -> None:
        self.repo = repo
        self.base = git(repo, "rev-parse", "HEAD")
        git(repo, "branch", BRANCH)
        self.tree = tmp / "milestone"
        git(repo, "worktree", "add", "-q", str(self.tree), BRANCH)
        self.n = 0

    def change(self, files: dict[str, str | bytes | None]) -> None:
        for name, content in files.items():
            path = self.tree / name
            if content is None:
                path.unlink()
            elif isinstance(content, bytes):
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(content)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(content)

    def merge(self, files: dict[str, str | bytes | None]) -> str:
        """One task's change merged --no-ff; the new tip."""
        self.n += 1
        task = f"task-{self.n}"
        git(self.tree, "checkout", "-q", "-b", task)
        self.change(files)
        git(self.tree, "add", "-A")
        git(self.tree, "commit", "-q", "--allow-empty", "-m", f"task {self.n}\n\nbody")
        git(self.tree, "checkout", "-q", BRANCH)
        git(self.tree, "merge", "-q", "--no-ff", "-m", f"soda: merge {task}", task)
        git(self.tree, "branch", "-q", "-D", task)
        return self.head()

    def head(self) -> str:
        return git(self.repo, "rev-parse", BRANCH)


def rows_of(store: DigestRows) -> list[Row]:
    return sorted(store.top(EVERYTHING))


def fresh(repo: Path, base: str, head: str, where: Path) -> tuple[Digest, list[Row]]:
    """The digest rebuilt from git alone, in a database of its own."""
    db = open_db(where)
    store = DigestRows(db, BRANCH, base)
    built = digest.rebuild(Repo(repo), store, base, head, 10)
    return built, rows_of(store)


def git_numstat(repo: Path, base: str, head: str) -> list[tuple[str, int, int, bool]]:
    found = []
    for line in git(repo, "diff", "--numstat", base, head).splitlines():
        plus, minus, path = line.split("\t", 2)
        binary = plus == "-"
        found.append((path, 0 if binary else int(plus), 0 if binary else int(minus), binary))
    return sorted(found)


class Checker:
    """Refreshes the stored digest and compares it with a rebuild and with git."""

    def __init__(self, repo: Path, base: str, tmp: Path) -> None:
        self.repo, self.base, self.tmp = repo, base, tmp
        self.git_repo = Repo(repo)
        self.store = DigestRows(open_db(tmp / "soda.db"), BRANCH, base)
        self.checks = 0

    def check(self, head: str) -> Digest:
        self.checks += 1
        now = digest.refresh(self.git_repo, self.store, self.base, head, 10)
        built, built_rows = fresh(self.repo, self.base, head, self.tmp / f"fresh-{self.checks}.db")
        assert now.state() == built.state()
        assert rows_of(self.store) == built_rows
        assert now.commits_total == int(
            git(self.repo, "rev-list", "--count", f"{self.base}..{head}")
        )
        shown = sorted((r[1], r[2], r[3], r[4]) for r in built_rows)
        assert shown == git_numstat(self.repo, self.base, head)
        assert (now.files, now.added, now.removed) == (
            len(shown),
            sum(r[1] for r in shown),
            sum(r[2] for r in shown),
        )
        return now


def test_each_merge_advances_the_digest_to_what_a_rebuild_says(repo: Path, tmp_path: Path) -> None:
    (repo / "lib.py").write_text("".join(f"line {n}\n" for n in range(40)))
    (repo / "docs").mkdir()
    (repo / "docs" / "guide.md").write_text("guide\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a base with files")
    ms = Milestone(repo, tmp_path)
    checker = Checker(repo, ms.base, tmp_path)
    assert checker.check(ms.head()).rebuilt  # the first SENSE builds it
    steps: list[dict[str, str | bytes | None]] = [
        {"src/a.py": "a = 1\n"},
        {"src/a.py": "a = 2\nb = 3\n", "src/b.py": "b\n"},
        {"lib.py": "changed\n"},
        {"docs/guide.md": "guide\nmore\n", "src/deep/er/c.py": "c\n"},
        {"lib.py": "".join(f"line {n}\n" for n in range(40))},  # back to the base's content
        {"src/a.py": None},  # added, then deleted again
        {"notes.txt": "no newline at the end"},
        {"empty.txt": ""},
    ]
    for files in steps:
        head = ms.merge(files)
        now = checker.check(head)
        assert not now.rebuilt  # advanced, not rebuilt
    assert checker.check(ms.head()).head == ms.head()  # the same tip: nothing to do


def test_several_merges_between_two_senses(repo: Path, tmp_path: Path) -> None:
    """A crash between a merge and the next SENSE leaves the stored digest behind
    the branch: the next SENSE walks everything since."""
    ms = Milestone(repo, tmp_path)
    checker = Checker(repo, ms.base, tmp_path)
    checker.check(ms.head())
    for n in range(5):
        ms.merge({f"f{n}.txt": f"{n}\n", "shared.txt": f"v{n}\n"})
    now = checker.check(ms.head())
    assert not now.rebuilt
    assert now.commits_total == 10
    assert [c["subject"] for c in now.recent[:2]] == ["soda: merge task-5", "task 5"]


def test_commits_of_one_second_keep_their_order(repo: Path, tmp_path: Path) -> None:
    """Newest first by time, then the descendant first: ten commits made within a
    second are listed as made, the same advanced or rebuilt."""
    ms = Milestone(repo, tmp_path)
    checker = Checker(repo, ms.base, tmp_path)
    checker.check(ms.head())
    env = {**os.environ, "GIT_COMMITTER_DATE": "1700000000 +0000"}
    for n in range(12):
        (ms.tree / "x.txt").write_text(f"{n}\n")
        git(ms.tree, "add", "x.txt")
        subprocess.run(["git", "commit", "-qm", f"step {n}"], cwd=ms.tree, env=env, check=True)
        if n % 4 == 3:
            now = checker.check(ms.head())
    assert [c["subject"] for c in now.recent] == [f"step {n}" for n in range(11, 1, -1)]


def test_a_person_resetting_or_rewriting_the_branch(repo: Path, tmp_path: Path) -> None:
    ms = Milestone(repo, tmp_path)
    checker = Checker(repo, ms.base, tmp_path)
    first = ms.merge({"a.txt": "a\n"})
    ms.merge({"b.txt": "b\n"})
    checker.check(ms.head())
    git(ms.tree, "reset", "-q", "--hard", first)  # the branch went back
    assert checker.check(ms.head()).rebuilt
    assert not checker.check(ms.merge({"c.txt": "c\n"})).rebuilt
    git(ms.tree, "commit", "-q", "--amend", "-m", "rewritten")  # and was rewritten
    assert checker.check(ms.head()).rebuilt
    ms.merge({"d.txt": "d\n"})
    assert not checker.check(ms.head()).rebuilt  # then advanced again
    git(ms.tree, "reset", "-q", "--hard", ms.base)  # back to the base: nothing since
    assert checker.check(ms.head()).commits_total == 0


def test_renames_and_deletions_match_git(repo: Path, tmp_path: Path) -> None:
    """Where git's rename detection could pair files differently, the digest is
    rebuilt; elsewhere it advances."""
    text = "".join(f"line {n}\n" for n in range(30))
    (repo / "old.py").write_text(text)
    (repo / "keep.py").write_text("keep\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "files")
    ms = Milestone(repo, tmp_path)
    checker = Checker(repo, ms.base, tmp_path)
    checker.check(ms.head())
    renamed = checker.check(ms.merge({"old.py": None, "new/place.py": text + "one more\n"}))
    assert any("=>" in row[1] for row in rows_of(checker.store))
    assert renamed.pairs == 1
    assert not checker.check(ms.merge({"keep.py": "kept\n"})).rebuilt  # not a candidate
    assert checker.check(ms.merge({"new/place.py": "all new\n"})).rebuilt  # the pair may break
    checker.check(ms.merge({"other.py": text}))
    checker.check(ms.merge({"old.py": text}))  # the deleted file is back


def test_quoted_binary_and_many_paths(repo: Path, tmp_path: Path) -> None:
    ms = Milestone(repo, tmp_path)
    checker = Checker(repo, ms.base, tmp_path)
    checker.check(ms.head())
    checker.check(ms.merge({"caf\u00e9 menu.txt": "x\n", 'q"uote.txt': "q\n", "tab\tname": "t\n"}))
    checker.check(ms.merge({"blob.bin": b"\0\1\2binary", "caf\u00e9 menu.txt": "y\nz\n"}))
    many = {f"many/f{n:03d}.txt": f"{n}\n" for n in range(digest.MAX_DELTA + 5)}
    assert checker.check(ms.merge(many)).rebuilt  # too many paths: git rebuilds it
    assert not checker.check(ms.merge({"many/f000.txt": "again\n"})).rebuilt


def test_a_change_of_git_settings_rebuilds(repo: Path, tmp_path: Path) -> None:
    """Attributes decide what git counts as binary: a new .gitattributes in the
    person's checkout makes the digest start again."""
    ms = Milestone(repo, tmp_path)
    checker = Checker(repo, ms.base, tmp_path)
    checker.check(ms.merge({"data.txt": "1\n2\n"}))
    (repo / ".gitattributes").write_text("*.txt binary\n")
    now = checker.check(ms.head())
    assert now.rebuilt
    assert rows_of(checker.store)[0][4] is True  # binary now


def test_commit_info_reads_what_git_log_prints(repo: Path) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Ada Lovelace",
        "GIT_AUTHOR_DATE": "1700000000 -0230",
        "GIT_COMMITTER_DATE": "1700000100 +0100",
    }
    message = "\n\n  First line  \nsecond line\n\nbody\n"
    subprocess.run(
        ["git", "commit", "-q", "--allow-empty", "--cleanup=verbatim", "-m", message],
        cwd=repo,
        env=env,
        check=True,
    )
    sha = git(repo, "rev-parse", "HEAD")
    info = commit_info(Repo(repo), sha)
    printed = git(repo, "log", "-1", "--format=%an%x1f%aI%x1f%s%x1f%ct%x1f%T%x1f%P", sha)
    assert printed.split("\x1f") == [
        info.author,
        info.date,
        info.subject,
        str(info.committed),
        info.tree,
        " ".join(info.parents),
    ]


def test_sense_claims_equal_a_full_recomputation(repo: Path, tmp_path: Path) -> None:
    ms = Milestone(repo, tmp_path)
    inputs = [
        SenseInput(repo, BRANCH, ms.base, "spec", 1, 1, 1, Config(), open_db(tmp_path / f"{n}.db"))
        for n in range(2)
    ]
    code_claims(inputs[0])
    for n in range(4):
        ms.merge({f"f{n}.txt": "x\n" * (n + 1)})
        kept = code_claims(inputs[0])
    rebuilt = code_claims(inputs[1])  # a database that never saw the branch
    assert kept == rebuilt
    assert kept.commits_total == 8 and len(kept.files_changed) == 4


CHILD = """
import sys
from pathlib import Path
from git import Repo
from soda.repo import digest
from soda.store import open_db
from soda.store.digests import DigestRows
from tests.test_digest import BRANCH, Milestone

repo, tmp, base = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
ms = Milestone.__new__(Milestone)
ms.repo, ms.base, ms.tree, ms.n = repo, base, tmp / "milestone", int(sys.argv[4])
store = DigestRows(open_db(tmp / "soda.db"), BRANCH, base)
git_repo = Repo(repo)
while True:
    ms.merge({f"k{ms.n}.txt": f"{ms.n}\\n", "shared.txt": f"v{ms.n}\\n"})
    print(ms.n, flush=True)
    digest.refresh(git_repo, store, base, ms.head(), 10)
"""


def test_kill9_in_the_middle_of_an_update_leaves_a_correct_digest(
    repo: Path, tmp_path: Path
) -> None:
    """A process that merges and refreshes in a loop is SIGKILLed after a random
    number of merges, anywhere: between a merge and its update, inside the
    update's transaction, inside git. What is stored is always some tip's
    digest, and the next refresh says what a rebuild says."""
    ms = Milestone(repo, tmp_path)
    checker = Checker(repo, ms.base, tmp_path)
    checker.check(ms.head())
    rng = random.Random(20261124)
    root = Path(__file__).resolve().parent.parent
    for round_ in range(4):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(repo), str(tmp_path), ms.base, str(ms.n + 1000)],
            cwd=root,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(root)},
        )
        try:
            assert child.stdout is not None
            for _ in range(rng.randint(1, 6)):
                assert child.stdout.readline(), f"round {round_}: the child died"
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
        ms.n += 1000
        _tidy_after_kill(repo, ms)
        assert checker.store.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        checker.check(ms.head())


def _tidy_after_kill(repo: Path, ms: Milestone) -> None:
    """What a killed git leaves in the test's own worktree (not soda's state): lock
    files, a merge half done, a task branch checked out."""
    for lock in (repo / ".git").rglob("*.lock"):
        lock.unlink()
    subprocess.run(["git", "merge", "--abort"], cwd=ms.tree, capture_output=True)
    git(ms.tree, "checkout", "-q", "--force", BRANCH)
    git(ms.tree, "clean", "-qfd")
