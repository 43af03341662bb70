"""An iteration's git work without a git process where git's own answer can be had
another way, each path checked against git itself on real repositories:

- the merge commit written in Python is the object `git commit-tree` writes
  (same bytes, so the same id), and where it could not be, git writes it;
- the milestone ref moves through one long-lived `git update-ref --stdin`: a
  compare-and-swap that lost refuses and moves nothing, and a helper that died
  is started again;
- a kill between the merge commit's write and the ref's move leaves the
  milestone where it was, the repository whole;
- the record's diffstat (a long-lived `git diff-tree`) is `git diff --stat`'s;
- SENSE's numstat rows of added and deleted files, read from the object
  database, are git's, attributes and binary files included;
- a task's commit stages just the files it wrote (`git add`), and its tree
  and commit are written from the index's entries for them;
- one task's iteration moves no files: its work tree holds the tip's tree,
  the gate tests the merge there, and the next ORIENT reads it there.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from git import Repo

from soda.errors import GitError
from soda.events import Events
from soda.repo import digest, helpers, objects, writing
from soda.repo.refs import branch_head, tree_of
from soda.repo.workspace import Changes, land, prepare_merge
from soda.store import open_db
from tests.conftest import git
from tests.test_checkouts import assert_clean_at, commits, git_spy, pool, subcommands

__all__ = ["commits"]  # a fixture, used by name


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def warm(repo: Repo) -> None:
    """Start what lives as long as the session: git's settings read, the object
    reader and the ref helper running (each one process, once)."""
    helpers.settings(repo)
    objects.tree_of(repo, branch_head(repo, "soda/spec"))
    helpers.transaction(repo, [])


# --- the merge commit ---------------------------------------------------------------


@pytest.mark.parametrize("zone", ["UTC0", "NST+3:30NDT,M3.2.0,M11.1.0", "IST-5:30"])
def test_the_merge_commit_is_the_object_git_commit_tree_writes(
    repo: Path, zone: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same tree, parents, identities (git's own: GIT_*_NAME, `committer.*` and
    soda's `-c user.*`), time zone and message bytes: the same id."""
    base = git(repo, "rev-parse", "HEAD")
    (repo / "a.txt").write_text("a\n")
    side = commit(repo, "side")
    git(repo, "config", "committer.name", "Committer Of Record")
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        now = 1_790_000_000.7
        monkeypatch.setattr(writing.time, "time", lambda: now)
        tree = git(repo, "rev-parse", f"{side}^{{tree}}")
        for message in (
            "soda: a task\n\nsummary \u00e9\n\nSoda-Iteration: 3\nSoda-Run: 1\nSoda-Task: 7\n",
            "no final newline",
            "  leading blanks\n\n\nkept as given\n",
        ):
            mine = writing.commit_tree(Repo(repo), tree, [base, side], message)
            assert mine is not None
            stamp = f"{int(now)} {writing._datestamp(now).split()[1]}"
            env = {**os.environ, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
            theirs = subprocess.run(
                ["git", "-c", "user.name=soda", "-c", "user.email=soda@localhost",
                 "commit-tree", tree, "-p", base, "-p", side, "-m", message],
                cwd=repo, env=env, check=True, capture_output=True, text=True,
            ).stdout.strip()  # fmt: skip
            assert mine == theirs
            assert git(repo, "cat-file", "-t", mine) == "commit"
            assert git(repo, "log", "-1", "--format=%P", mine) == f"{base} {side}"
        assert git(repo, "fsck", "--no-dangling") == ""
    finally:
        monkeypatch.undo()
        time.tzset()


def test_git_writes_the_commit_when_only_git_can_be_sure(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = git(repo, "rev-parse", "HEAD^{tree}")
    head = git(repo, "rev-parse", "HEAD")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "1700000000 +0000")
    assert writing.commit_tree(Repo(repo), tree, [head], "fixed date") is None
    monkeypatch.delenv("GIT_COMMITTER_DATE")
    git(repo, "config", "i18n.commitEncoding", "ISO-8859-1")
    assert writing.commit_tree(Repo(repo), tree, [head], "another encoding") is None
    git(repo, "config", "--unset", "i18n.commitEncoding")
    assert writing.commit_tree(Repo(repo), tree, [head], "a\0b") is None
    assert writing.commit_tree(Repo(repo), tree, [head], "fine") is not None


def test_prepare_merge_writes_no_process_and_land_moves_the_ref(
    repo: Path, commits: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, b = commits
    checkouts = pool(repo)
    ws = checkouts.work("soda/spec", "soda-work/spec/iter-1-a")
    (ws.path / "mine.txt").write_text("mine\n")
    ws.commit_all("mine")
    assert ws.catch_up()
    warm(checkouts.repo)
    log = git_spy(tmp_path, monkeypatch)
    candidate, expected = prepare_merge(ws, "soda: mine\n\nSoda-Iteration: 1\n")
    land(checkouts.repo, "soda/spec", candidate, expected, delete=ws)
    assert subcommands(log) == []  # the object in Python, the ref through the helper
    assert git(repo, "rev-parse", "soda/spec") == candidate
    assert git(repo, "rev-parse", f"{candidate}^1", f"{candidate}^2").split() == [b, ws.head()]
    assert git(repo, "rev-parse", f"{candidate}^{{tree}}") == git(
        repo, "rev-parse", f"{ws.head()}^{{tree}}"
    )
    assert git(repo, "branch", "--list", "soda-work/*") == ""
    checkouts.release(ws, clean=True)
    checkouts.remove_all()


# --- the ref: compare-and-swap --------------------------------------------------------


def test_a_compare_and_swap_that_lost_refuses_and_moves_nothing(
    repo: Path, commits: tuple[str, str]
) -> None:
    a, b = commits
    checkouts = pool(repo)
    ws = checkouts.work("soda/spec", "soda-work/spec/iter-1-a")
    (ws.path / "x.txt").write_text("x\n")
    ws.commit_all("x")
    candidate, expected = prepare_merge(ws, "soda: x")
    git(repo, "update-ref", "refs/heads/soda/spec", a)  # someone else moved it
    with pytest.raises(GitError, match="moved from"):
        land(checkouts.repo, "soda/spec", candidate, expected, delete=ws)
    assert git(repo, "rev-parse", "soda/spec") == a
    listed = git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/soda-work/")
    assert listed == "soda-work/spec/iter-1-a"
    assert not ws.branch_deleted
    assert not list((repo / ".git" / "refs" / "heads").rglob("*.lock"))
    # The helper git ended with the refusal; the next transaction starts another.
    helpers.transaction(checkouts.repo, [f"update refs/heads/soda/spec {b} {a}"])
    assert git(repo, "rev-parse", "soda/spec") == b
    checkouts.release(ws)
    checkouts.remove_all()


def test_a_transaction_applies_all_of_its_lines_or_none(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    r = Repo(repo)
    helpers.transaction(r, [f"create refs/heads/one {head}"])
    with pytest.raises(GitError, match="update-ref"):
        helpers.transaction(
            r, [f"update refs/heads/two {head}", f"create refs/heads/one {head}"]
        )  # `one` exists: the whole transaction fails
    assert git(repo, "branch", "--list", "two") == ""
    with pytest.raises(GitError):
        helpers.transaction(r, ["update refs/heads/x\nupdate refs/heads/y"])


def test_a_helper_killed_from_outside_is_started_again(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    r = Repo(repo)
    helpers.transaction(r, [f"create refs/heads/one {head}"])
    proc = helpers.helpers_of(r).refs.proc
    assert proc is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    helpers.transaction(r, [f"create refs/heads/two {head}"])
    assert git(repo, "branch", "--list", "two").strip() == "two"
    assert helpers.helpers_of(r).refs.started == 2
    helpers.close(r)


KILL_BEFORE_LAND = """
import os, signal, sys
from pathlib import Path
from git import Repo
from soda.repo.checkouts import Checkouts
from soda.repo.workspace import prepare_merge, helpers
root = Path(sys.argv[1])
checkouts = Checkouts(Repo(root), root / "state" / "worktrees")
ws = checkouts.work("soda/spec", "soda-work/spec/iter-9-a")
(ws.path / "late.txt").write_text("late\\n")
ws.commit_all("late")
candidate, expected = prepare_merge(ws, "soda: late\\n\\nSoda-Iteration: 9\\n")
helpers.transaction(checkouts.repo, [f"create refs/heads/probe {expected}"])  # helper up
print(candidate, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_kill_between_the_merge_commit_and_the_ref_leaves_the_milestone(
    repo: Path, commits: tuple[str, str]
) -> None:
    _, b = commits
    done = subprocess.run(
        [sys.executable, "-c", KILL_BEFORE_LAND, str(repo)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == -signal.SIGKILL, done.stderr
    candidate = done.stdout.strip()
    assert git(repo, "rev-parse", "soda/spec") == b  # the milestone did not move
    assert git(repo, "cat-file", "-t", candidate) == "commit"  # whole, unreachable
    assert git(repo, "fsck", "--no-dangling") == ""
    assert not list((repo / ".git").rglob("*.lock"))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _helpers_alive(repo):
        time.sleep(0.05)
    assert not _helpers_alive(repo)  # the long-lived gits ended with their input


def _helpers_alive(root: Path) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            cwd = os.readlink(entry / "cwd")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if b"update-ref\0--stdin" in cmdline and cwd == os.path.realpath(root) and state != "Z":
            found.append(entry.name)
    return found


# --- the record's diffstat ------------------------------------------------------------


def test_the_diffstat_is_git_diff_stat(repo: Path, commits: tuple[str, str]) -> None:
    checkouts = pool(repo)
    ws = checkouts.work("soda/spec", "soda-work/spec/iter-1-a")
    (ws.path / "new.txt").rename(ws.path / "renamed.txt")
    (ws.path / "README.md").write_text("# sample\nmore\nlines\n")
    (ws.path / "data.bin").write_bytes(b"\0\1\2" * 100)
    (ws.path / "src").mkdir()
    (ws.path / "src" / ("long_name_of_a_module_" + "x" * 60 + ".py")).write_text("x = 1\n" * 40)
    ws.commit_all("several kinds")
    expected = subprocess.run(
        ["git", "diff", "--stat", ws.fork_point, ws.head(), "--"],
        cwd=ws.path, check=True, capture_output=True, text=True,
    ).stdout.rstrip("\n")  # fmt: skip
    assert ws.diff_stat() == expected
    assert "=>" in expected and "Bin" in expected
    checkouts.release(ws)
    checkouts.remove_all()


# --- SENSE's numstat rows -----------------------------------------------------------------


def test_numstat_rows_of_added_and_deleted_files_are_gits(repo: Path) -> None:
    (repo / "gone.txt").write_text("one\ntwo\n")
    (repo / "gone.bin").write_bytes(b"a\0b")
    (repo / "edited.txt").write_text("old\n")
    (repo / ".gitattributes").write_text(
        "*.nodiff -diff\n*.forced diff\n*.conv diff=upper\n*.py diff=python\n"
    )
    git(repo, "config", "diff.upper.textconv", "tr a-z A-Z")
    git(repo, "config", "core.bigFileThreshold", "2k")
    base = commit(repo, "base")
    (repo / "gone.txt").unlink()
    (repo / "gone.bin").unlink()
    (repo / "edited.txt").write_text("new\n")
    files = {
        "plain.txt": b"a\nb\nc\n",
        "no-newline.txt": b"a\nb",
        "empty.txt": b"",
        "only-newline.txt": b"\n",
        "nul.dat": b"text\0more\n",
        "late-nul.dat": b"x" * 8000 + b"\0",
        "big.txt": b"line\n" * 1000,
        "x.nodiff": b"a\nb\n",
        "x.forced": b"a\0b\nc\n",
        "x.conv": b"a\nb\n",
        "m.py": b"def f():\n    pass\n",
        "sp ace.txt": b"s\n",
        "caf\u00e9.txt": b"c\n",
        "deep/er/file.txt": b"d\n",
    }
    for name, data in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_bytes(data)
    (repo / "tool.sh").write_text("echo\n")
    (repo / "tool.sh").chmod(0o755)
    (repo / "link").symlink_to("plain.txt")
    head = commit(repo, "head")
    r = Repo(repo)
    changes = objects.changed_paths(r, tree_of(r, base), tree_of(r, head), 100)
    mine = digest.numstat(r, base, head, changes, "test")
    paths = [change.path for change in changes]
    theirs = digest.parse_numstat(
        git(repo, "diff", "--raw", "--numstat", "--no-renames", base, head, "--", *paths)
    )
    assert sorted(mine) == sorted(theirs)
    assert len(mine) == len(files) + 5  # + tool.sh, link, the two deletions, the edit


def test_sense_reads_added_files_without_a_git_diff(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from soda.store.digests import DigestRows

    db = open_db(tmp_path / "soda.db")
    base = git(repo, "rev-parse", "HEAD")
    store = DigestRows(db, "main", base)
    r = Repo(repo)
    digest.refresh(r, store, base, base, 10)
    (repo / "one.txt").write_text("1\n")
    first = commit(repo, "one")
    digest.refresh(r, store, base, first, 10)  # the helpers start
    (repo / "two.txt").write_text("2\n2\n")
    second = commit(repo, "two")
    log = git_spy(tmp_path, monkeypatch)
    found = digest.refresh(r, store, base, second, 10)
    assert "diff" not in subcommands(log)
    assert (found.files, found.added, found.removed) == (2, 3, 0)
    assert not found.rebuilt


# --- a task's commit ----------------------------------------------------------------------


def test_a_task_commit_stages_just_what_it_wrote(
    repo: Path, commits: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`git add` of the written files, then the tree and the commit written from
    the index's entries for them: the tree git's own `write-tree` makes of that
    index, the checkout clean at the new head, the branch moved."""
    checkouts = pool(repo)
    ws = checkouts.work("soda/spec", "soda-work/spec/iter-1-a")
    warm(checkouts.repo)
    log = git_spy(tmp_path, monkeypatch)
    assert ws.commit_all("nothing", changes=Changes([])) is None
    assert subcommands(log) == []
    (ws.path / "README.md").write_text("edited\n")
    (ws.path / "pkg" / "deep").mkdir(parents=True)
    (ws.path / "pkg" / "deep" / "new.py").write_text("y = 1\n")
    (ws.path / "pkg" / "tool.sh").write_text("echo\n")
    (ws.path / "pkg" / "tool.sh").chmod(0o755)
    (ws.path / "pkg-a.txt").write_text("sorts between pkg and pkg/\n")
    written = ["README.md", "pkg/deep/new.py", "pkg/tool.sh", "pkg-a.txt"]
    first = ws.commit_all("  several\t\n\n\n  files  \n\n", Changes(written))
    assert subcommands(log) == ["add"]
    assert first is not None and first == ws.head()
    assert git(ws.path, "rev-parse", "HEAD", "soda-work/spec/iter-1-a").split() == [first] * 2
    assert git(ws.path, "write-tree") == git(ws.path, "rev-parse", "HEAD^{tree}")
    assert git(ws.path, "status", "--porcelain", "--untracked-files=all") == ""
    raw = subprocess.run(
        ["git", "cat-file", "commit", first], cwd=repo, capture_output=True, check=True
    ).stdout
    assert raw.endswith(b"\n\n  several\n\n  files\n")  # as `git commit -m` keeps it
    shown = git(repo, "show", "--name-status", "--format=", first).splitlines()
    assert sorted(shown) == [
        "A\tpkg-a.txt", "A\tpkg/deep/new.py", "A\tpkg/tool.sh", "M\tREADME.md",
    ]  # fmt: skip
    assert git(repo, "ls-tree", first, "pkg/tool.sh").startswith("100755 blob")
    (ws.path / "pkg" / "deep" / "new.py").write_text("y = 1\n")  # the same content
    assert ws.commit_all("again", Changes(["pkg/deep/new.py"])) is None
    assert ws.head() == first
    # An ignored file written: `git add` refuses it, the full way commits the rest.
    (ws.path / "debug.log").write_text("ignored\n")
    (ws.path / "other.txt").write_text("o\n")
    subcommands(log)
    rest = ws.commit_all("rest", changes=Changes(["debug.log", "other.txt"]))
    assert subcommands(log)[-2:] == ["add", "commit"]
    assert git(repo, "show", "--name-only", "--format=", rest) == "other.txt"
    assert git(ws.path, "status", "--porcelain") == ""
    assert git(repo, "fsck", "--no-dangling") == ""
    checkouts.release(ws)
    checkouts.remove_all()


def test_what_a_task_changed_is_known_only_when_nothing_ran(
    repo: Path, commits: tuple[str, str]
) -> None:
    from soda.loop.act.pristine import Watched
    from soda.system.jail import Jail
    from soda.tools import Sandbox, worktree_tools

    checkouts = pool(repo)
    ws = checkouts.work("soda/spec", "soda-work/spec/iter-1-a")
    sandbox = Sandbox(ws.path)
    jail = Jail(mode="none", repo_root=repo, git_dir=repo / ".git")
    tools = Watched(worktree_tools(sandbox, 30, 10_000, jail=jail), sandbox)
    tools.call("read_file", {"path": "README.md", "offset_line": None, "max_lines": None})
    tools.call("write_file", {"path": "src/new.py", "content": "x = 1\n"})
    tools.call("write_file", {"path": "./src/new.py", "content": "x = 2\n"})
    assert tools.changes() == Changes(["src/new.py"])
    tools.call("run_command", {"command": "true", "timeout_seconds": None})
    assert tools.changes() is None
    checkouts.release(ws)
    checkouts.remove_all()


def test_the_index_lookup_refuses_what_it_cannot_be_sure_of(repo: Path) -> None:
    index = repo / ".git" / "index"
    found = objects.index_entries(index, ["README.md"])
    assert found == {"README.md": (0o100644, git(repo, "rev-parse", "HEAD:README.md"))}
    (repo / "later.txt").write_text("l\n")
    git(repo, "add", "-N", "later.txt")  # intent to add: an extended flag
    with pytest.raises(objects.Undecided):
        objects.index_entries(index, ["later.txt"])
    with pytest.raises(objects.Undecided):
        objects.index_entries(index, ["EADME.md"])  # a name's tail is not an entry
    git(repo, "update-index", "--index-version", "4")
    with pytest.raises(objects.Undecided):
        objects.index_entries(index, ["README.md"])


def test_stripspace_is_gits(repo: Path) -> None:
    for text in ("a", "\n\n a \t\n\n\n\nb\r\n\n", "x\x0b\n", "caf\u00e9 \n", "\n \n"):
        theirs = subprocess.run(
            ["git", "stripspace"], input=text.encode(), capture_output=True, check=True
        ).stdout
        assert writing.stripspace(text.encode()) == theirs


# --- one task's iteration moves no files ------------------------------------------------------


def test_one_tasks_iteration_moves_no_files(
    repo: Path, commits: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ORIENT's view of the tip, the task's work tree, the gate's checkout of the
    merge and the next ORIENT's view: one directory, no git process but the
    `git add` of the task's file, every checkout clean where it claims to be."""
    _, b = commits
    checkouts = pool(repo)
    with checkouts.viewing(b) as viewed:  # ORIENT
        assert_clean_at(viewed, b)
    warm(checkouts.repo)
    log = git_spy(tmp_path, monkeypatch)
    for n in range(1, 4):
        ws = checkouts.work("soda/spec", f"soda-work/spec/iter-{n}-a")
        assert ws.path == viewed  # the tip's tree is there already
        (ws.path / f"f{n}.txt").write_text(f"{n}\n")
        ws.commit_all(f"task {n}", changes=Changes([f"f{n}.txt"]))
        checkouts.vouch(ws)
        assert ws.catch_up()
        candidate, expected = prepare_merge(ws, f"soda: task {n}")
        with checkouts.viewing(candidate) as gate_path:  # the gate, sealed
            pass
        land(checkouts.repo, "soda/spec", candidate, expected, delete=ws)
        checkouts.release(ws, clean=True)
        with checkouts.viewing(candidate) as viewed:  # the next ORIENT
            pass
        assert subcommands(log) == ["add"]  # soda's; the checks' below
        assert gate_path == viewed == ws.path
        assert_clean_at(viewed, candidate)
        subcommands(log)
    assert git(repo, "worktree", "list").count("\n") == 1  # the checkout and one more
    checkouts.remove_all()


def test_an_unvouched_work_tree_is_not_the_gates_checkout(
    repo: Path, commits: tuple[str, str]
) -> None:
    """A task that left something besides its commit (a command ran, an ignored
    file written) does not vouch: the gate's checkout is another, made clean."""
    checkouts = pool(repo)
    ws = checkouts.work("soda/spec", "soda-work/spec/iter-1-a")
    (ws.path / "mine.txt").write_text("mine\n")
    (ws.path / "stray.log").write_text("ignored, not committed\n")
    ws.commit_all("mine")
    candidate, _ = prepare_merge(ws, "soda: mine")
    with checkouts.viewing(candidate) as gate_path:
        assert gate_path != ws.path
        assert_clean_at(gate_path, candidate)
        assert not (gate_path / "stray.log").exists()
    checkouts.release(ws)
    checkouts.remove_all()


def test_a_held_view_is_never_a_work_tree(repo: Path, commits: tuple[str, str]) -> None:
    _, b = commits
    checkouts = pool(repo)
    with checkouts.viewing(b) as held:
        ws = checkouts.work("soda/spec", "soda-work/spec/iter-1-a")
        assert ws.path != held
        checkouts.release(ws, clean=True)
    again = checkouts.work("soda/spec", "soda-work/spec/iter-2-a")
    assert again.path in (held, ws.path)
    assert_clean_at(again.path, b)
    checkouts.release(again)
    checkouts.remove_all()


# --- the events log -------------------------------------------------------------------------


def test_the_events_log_stays_open_and_follows_a_moved_file(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "events.jsonl"
    events = Events(open_db(tmp_path / "soda.db"), log)
    events.emit("one")
    events.for_run(None).emit("two")
    log.rename(tmp_path / "old.jsonl")
    events.emit("three")
    assert [line.count('"kind"') for line in log.read_text().splitlines()] == [1]
    assert '"three"' in log.read_text()
    assert (tmp_path / "old.jsonl").read_text().count("\n") == 2
