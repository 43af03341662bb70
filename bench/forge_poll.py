"""What reading a pull request costs: requests that count against GitHub's rate
limit, and wall time, for a first read, an unchanged one and one with a single new
comment, against the GitHub stand-in (tests/fakeforge.py, its answers checked
against GitHub's OpenAPI description) on 127.0.0.1.

The pull request carries `--comments` comments of each kind (inline, reviews,
conversation) and `--checks` check runs. Goal: an unchanged pull request costs 0
rate-limited requests (every GET answered 304 to its ETag), so the idle daemon
may read it every minute all day; a new comment costs only the pages that changed.

    python bench/forge_poll.py [--comments 250] [--checks 20]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.fakeforge

from soda.config import Config, ForgeConfig
from soda.events import Events
from soda.forge import connect
from soda.store import open_db
from tests.fakeforge import NAME, OWNER, TOKEN, FakeForge


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--comments", type=int, default=250)
    parser.add_argument("--checks", type=int, default=20)
    args = parser.parse_args()
    os.environ["GITHUB_TOKEN"] = TOKEN
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        bare, repo = root / "remote.git", root / "repo"
        git(root, "init", "-q", "--bare", "-b", "main", str(bare))
        git(root, "init", "-q", "-b", "main", str(repo))
        git(repo, "commit", "-q", "--allow-empty", "-m", "base")
        git(repo, "remote", "add", "origin", str(bare))
        git(repo, "push", "-q", "origin", "main")
        git(repo, "checkout", "-q", "-b", "soda/spec")
        git(repo, "commit", "-q", "--allow-empty", "-m", "work")
        tip = git(repo, "rev-parse", "HEAD")
        forge = FakeForge(bare)
        forge.thread.start()
        try:
            settings = ForgeConfig(mode="draft", api_url=forge.url, repository=f"{OWNER}/{NAME}")
            db = open_db(root / "soda.db")
            pulls = connect(Config(forge=settings, root=repo), db, "soda/spec")
            assert pulls is not None
            events = Events(db)
            pulls.publish(tip, "bench", "body", events)
            for n in range(args.comments):
                forge.add_review_comment(1, "alice", "OWNER", f"inline {n}", "a.py", n + 1)
                forge.add_review(1, "bob", "NONE", "COMMENTED", f"review {n}")
                forge.add_issue_comment(1, "carol", "CONTRIBUTOR", f"comment {n}")
            for n in range(args.checks):
                forge.add_check(tip, f"check-{n}", "success")

            def read(label: str) -> None:
                before, started = forge.costly, time.perf_counter()
                poll = pulls.poll(events)
                took = (time.perf_counter() - started) * 1000
                print(
                    f"{label:<22} {forge.costly - before:>4} rate-limited requests"
                    f"  {took:8.1f} ms  ({poll.new_inputs} new inputs, {len(poll.checks)} checks)"
                )

            read("first read")
            read("unchanged")
            forge.add_issue_comment(1, "alice", "OWNER", "one more")
            read("one new comment")
            before = forge.costly
            read("unchanged again")
            return 0 if forge.costly == before and not forge.problems else 1
        finally:
            forge.server.shutdown()
            forge.server.server_close()


if __name__ == "__main__":
    sys.exit(main())
