"""The README's pictures of the web dashboard, taken from the demo.

Builds the demo's sample project (the scripted model, no network), asks soda
to want approval for any plan (`risk_threshold = "low"`), starts it with
`soda start --web`, and photographs the Now page while the plan waits; approves
it on the page, lets the run reach DONE and photographs iteration 1. Needs the
[web] extra, playwright and Debian's chromium (scripts/setup-tests).

    .venv/bin/python scripts/web_screenshots.py [--out docs]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

from soda.cli.demo import prepare

FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def soda(root: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "soda", "-C", str(root), *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs"))
    out = parser.parse_args().out.resolve()
    with tempfile.TemporaryDirectory(prefix="soda-shots-") as temp:
        root = Path(temp) / "calc"
        prepare(root)
        config = root / "soda.toml"
        config.write_text(
            config.read_text().replace('risk_threshold = "high"', 'risk_threshold = "low"')
        )
        subprocess.run(["git", "-C", str(root), "commit", "-qam", "ask first"], check=True)
        line = soda(root, "start", "--web", "--web-port", "0").strip().splitlines()[-1]
        base = line.split("serving ", 1)[1].split(" ", 1)[0].rstrip("/")
        try:
            shoot(base, root, out)
        finally:
            soda(root, "stop")


def shoot(base: str, root: Path, out: Path) -> None:
    with sync_playwright() as playwright, tempfile.TemporaryDirectory() as profile:
        browser = playwright.chromium.launch_persistent_context(
            profile,
            executable_path="/usr/bin/chromium",
            headless=True,
            args=FLAGS,
            viewport={"width": 1200, "height": 820},
        )
        page = browser.new_page()
        page.goto(base + "/")
        expect(page.locator("#approval")).to_be_visible(timeout=60_000)
        page.screenshot(path=str(out / "web-now.png"))
        page.locator("#approval [data-action=approve]").click()
        deadline = time.monotonic() + 120
        while json.loads(soda(root, "status", "--json"))["last_decision"] != "DONE":
            if time.monotonic() > deadline:
                raise SystemExit("the demo did not reach DONE within 120 s")
            time.sleep(0.2)
        page.goto(base + "/iteration/1")
        page.screenshot(path=str(out / "web-iteration.png"), full_page=True)
        browser.close()
    print(f"wrote {out / 'web-now.png'} and {out / 'web-iteration.png'}")


if __name__ == "__main__":
    main()
