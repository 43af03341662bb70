"""The web dashboard, read: the demo's history in a real headless Chromium
against a real `soda web` process, compared with what the CLI says; live
events; the guard (CSRF, Host, Origin, the access token) tested by what does
NOT happen; no request to another origin; one-line error pages."""

from __future__ import annotations

import http.client
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from soda.events import Events
from soda.store.db import open_db
from tests.conftest import soda, wait_for
from tests.web_helpers import WebServer, screenshot, serving

PAGES = ("/", "/history", "/iteration/1", "/iteration/2", "/tasks", "/events")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's history, built once: two iterations, one merge, DONE."""
    root = tmp_path_factory.mktemp("web") / "demo"
    done = soda("demo", "--dir", str(root), cwd=root.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    return root


@pytest.fixture(scope="module")
def server(demo: Path) -> Iterator[WebServer]:
    with serving(demo) as running:
        yield running


def inbox_files(root: Path) -> list[str]:
    inbox = root / "state" / "inbox"
    return sorted(p.name for p in inbox.iterdir() if p.is_file()) if inbox.exists() else []


def inputs_recorded(root: Path) -> int:
    db = open_db(root / "state" / "soda.db")
    return int(db.execute("SELECT count(*) FROM human_inputs").fetchone()[0])


def test_the_demo_history_is_what_soda_history_json_says(
    demo: Path, server: WebServer, page: Any
) -> None:
    from playwright.sync_api import expect

    expected = json.loads(soda("history", "--json", cwd=demo).stdout)["iterations"]
    assert [it["number"] for it in expected] == [1, 2]
    page.goto(server.base + "/history")
    rows = page.locator("#history tbody tr")
    expect(rows).to_have_count(len(expected))
    for index, it in enumerate(expected):
        row = rows.nth(index)
        assert row.get_attribute("data-number") == str(it["number"])
        assert row.locator("[data-col=decision]").inner_text() == it["decision"]
        assert row.locator("[data-col=outcome]").inner_text() == it["outcome"]
        assert row.locator("[data-col=merged]").inner_text() == (it["merged_commit"] or "-")[:10]
        assert row.locator("[data-col=tokens]").inner_text() == f"{it['tokens']:,}"
        assert row.locator("[data-col=cost]").inner_text() == f"${it['cost_usd']:.4f}"
    expect(page.locator("figure.chart")).to_have_count(3)
    expect(page.locator("figure.chart rect.bar-passed")).to_have_count(2)  # the gate, twice
    screenshot(page, "history")

    shown = json.loads(soda("show", "1", "--json", cwd=demo).stdout)
    page.locator("#history a", has_text="1").first.click()
    expect(page).to_have_url(server.base + "/iteration/1")
    (task,) = shown["act"]["tasks"]
    node = page.locator(f"#dag .node[data-key={task['key']}]")
    expect(node).to_have_attribute("data-state", task["status"])
    expect(page.locator("table.calls tbody tr")).to_have_count(len(shown["agent_calls"]))
    failed = page.locator("#gate details.failed summary")
    expect(failed).to_have_count(3)  # the milestone head before: 3 acceptance tests failed
    expect(failed.first).to_contain_text("tests.test_acceptance::test_divide")
    expect(page.locator("#gate")).to_contain_text("cannot import name 'divide'")
    expect(page.locator("#task-a pre.diffstat")).to_contain_text("1 file changed")
    screenshot(page, "iteration")

    page.goto(server.base + "/tasks")
    expect(page.locator(".tree li[data-status=closed]").first).to_be_visible()
    screenshot(page, "tasks")
    page.goto(server.base + "/")
    expect(page.locator("#now-iteration")).to_have_text("2")
    expect(page.locator("#running")).to_have_text("not running")
    screenshot(page, "now")


def test_a_live_event_shows_within_a_second_and_the_filter_keeps_to_its_kind(
    demo: Path, server: WebServer, page: Any
) -> None:
    from playwright.sync_api import expect

    page.goto(server.base + "/events")
    expect(page.locator("#live")).to_have_text("live", timeout=10_000)
    hostile = "<b id=injected>hello</b><script>document.title='owned'</script>"
    Events(open_db(demo / "state" / "soda.db")).emit("web.ping", {"said": hostile})
    expect(page.locator("#events tr", has_text="web.ping")).to_be_visible(timeout=1_000)
    screenshot(page, "events")
    # What an event says is text, live and after a reload: never markup.
    expect(page.locator("#events tr", has_text="web.ping")).to_contain_text("<b id=injected>")
    page.reload()
    expect(page.locator("#events tr", has_text="web.ping")).to_contain_text("<b id=injected>")
    expect(page.locator("#injected")).to_have_count(0)
    assert page.title() != "owned"

    page.goto(server.base + "/events?kind=act.task")
    expect(page.locator("#live")).to_have_text("live", timeout=10_000)
    kinds = page.locator("#events td.kind").all_inner_texts()
    assert kinds and all(kind.startswith("act.task") for kind in kinds)
    Events(open_db(demo / "state" / "soda.db")).emit("web.other", {})
    Events(open_db(demo / "state" / "soda.db")).emit("act.task.web", {})
    expect(page.locator("#events tr", has_text="act.task.web")).to_be_visible(timeout=1_000)
    expect(page.locator("#events tr", has_text="web.other")).to_have_count(0)


def first_event_id(server: WebServer, path: str, last_event_id: int) -> int:
    """The id of the first event a stream sends after `Last-Event-ID`."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request(
            "GET",
            path,
            headers={"Host": f"127.0.0.1:{server.port}", "Last-Event-ID": str(last_event_id)},
        )
        response = conn.getresponse()
        assert response.status == 200
        assert response.getheader("content-type", "").startswith("text/event-stream")
        for _ in range(50):
            line = response.fp.readline().decode()
            if line.startswith("id: "):
                return int(line[4:])
        raise AssertionError("the stream sent no event")
    finally:
        conn.close()


def test_the_stream_resumes_after_last_event_id(demo: Path, server: WebServer) -> None:
    db = open_db(demo / "state" / "soda.db")
    ids = [row[0] for row in db.execute("SELECT id FROM events ORDER BY id")]
    assert first_event_id(server, "/stream", ids[4]) == ids[5]
    turns = [row[0] for row in db.execute("SELECT id FROM events WHERE kind = 'agent.turn'")]
    assert first_event_id(server, "/stream?kind=agent.turn", turns[2]) == turns[3]


def test_the_pages_ask_nothing_of_another_origin(server: WebServer, page: Any) -> None:
    asked: list[str] = []
    complaints: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    page.on("console", lambda message: complaints.append(message.text))
    for path in PAGES:
        response = page.goto(server.base + path)
        assert response is not None and response.status == 200, path
        policy = response.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src 'self'" in policy
        page.wait_for_load_state("load")
    assert len(asked) >= len(PAGES)
    foreign = [url for url in asked if not url.startswith(server.base + "/")]
    assert foreign == []
    assert [c for c in complaints if "Content Security Policy" in c] == []


def test_a_post_without_the_csrf_token_or_from_another_host_changes_nothing(
    demo: Path, server: WebServer
) -> None:
    token = server.csrf()
    before = (inbox_files(demo), inputs_recorded(demo))
    host = f"127.0.0.1:{server.port}"
    attempts = [
        ("kind=pause&back=/", {}, 403),
        (f"kind=pause&csrf={token[:-1]}x", {}, 403),
        (f"kind=pause&csrf={token}", {"Host": f"evil.example:{server.port}"}, 400),
        (f"kind=pause&csrf={token}", {"Host": "evil.example"}, 400),
        (f"kind=pause&csrf={token}", {"Origin": "http://evil.example"}, 403),
        (f"kind=pause&csrf={token}", {"Sec-Fetch-Site": "cross-site"}, 403),
    ]
    for body, headers, status in attempts:
        code, _, text = server.request("POST", "/act/control", body, headers)
        assert code == status, (headers, text)
        assert text.startswith("soda web: ") and text.count("\n") == 1, text
    code, _, text = server.request("GET", "/", headers={"Host": "rebound.example:80"})
    assert code == 400 and "rebound.example" in text
    assert (inbox_files(demo), inputs_recorded(demo)) == before
    # The same form with the token, from this host, is written (so the refusals
    # above were the guard's, not a broken form).
    code, headers, _ = server.request(
        "POST", "/act/control", f"kind=pause&csrf={token}", {"Origin": f"http://{host}"}
    )
    assert code == 303 and headers["location"].startswith("/?said=queued+pause")
    (written,) = set(inbox_files(demo)) - set(before[0])
    assert re.fullmatch(r"\d{8}T\d{12}Z-pause-[0-9a-f]{6}\.web\.json", written)
    (demo / "state" / "inbox" / written).unlink()


def test_an_error_page_is_one_line(server: WebServer, page: Any) -> None:
    from playwright.sync_api import expect

    response = page.goto(server.base + "/iteration/999")
    assert response is not None and response.status == 400
    expect(page.locator("#problem")).to_have_text("soda web: no iteration 999 (see `soda history`)")
    response = page.goto(server.base + "/no/such/page")
    assert response is not None and response.status == 404
    expect(page.locator("#problem")).to_have_text("soda web: no such page")
    assert "Traceback" not in page.content()


def test_an_empty_project_says_what_to_do_first(repo: Path, page: Any) -> None:
    from playwright.sync_api import expect

    assert soda("init", cwd=repo).returncode == 0
    with serving(repo) as server:
        page.goto(server.base + "/")
        expect(page.locator(".card.empty h2")).to_have_text("Nothing has run here yet")
        expect(page.locator(".card.empty")).to_contain_text("soda run --once")
        screenshot(page, "now-empty")
        page.goto(server.base + "/history")
        expect(page.locator(".card.empty")).to_contain_text("No iterations yet")


def test_a_correction_pause_and_resume_from_the_page_are_inputs_from_the_web(
    repo: Path, page: Any
) -> None:
    from playwright.sync_api import expect

    from soda.human import HumanQueue

    assert soda("init", cwd=repo).returncode == 0
    state = repo / "state"
    queue = HumanQueue(state, open_db(state / "soda.db"), Events(open_db(state / "soda.db")))
    with serving(repo) as server:
        page.goto(server.base + "/")
        page.locator("#tell-text").fill("use argparse, not click")
        page.locator("[data-action=tell]").click()
        expect(page.locator(".said")).to_have_text("queued correction: use argparse, not click")
        page.locator("[data-action=pause]").click()
        expect(page.locator(".said")).to_have_text("queued pause")
        assert len(queue.ingest(settle_seconds=0).accepted) == 2
        page.reload()
        expect(page.locator(".badge.paused")).to_have_text("paused")
        page.locator("[data-action=resume]").click()
        expect(page.locator(".said")).to_have_text("queued resume")
        queue.ingest(settle_seconds=0)
        page.reload()
        expect(page.locator(".badge.paused")).to_have_count(0)
    rows = queue.db.execute("SELECT kind, source, payload_json FROM human_inputs ORDER BY id")
    found = [(kind, source, json.loads(payload).get("text")) for kind, source, payload in rows]
    assert found == [
        ("correction", "web", "use argparse, not click"),
        ("pause", "web", None),
        ("resume", "web", None),
    ]


def test_remote_needs_the_flag_and_then_the_token(demo: Path, server: WebServer) -> None:
    refused = soda("web", "--host", "192.0.2.7", "--port", "0", cwd=demo)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "soda: --host 192.0.2.7 is not loopback: other machines could reach the dashboard;"
        " add --remote to serve it there behind an access token"
    ]
    taken = soda("web", "--port", str(server.port), cwd=demo)
    assert taken.returncode == 2 and len(taken.stderr.strip().splitlines()) == 1
    assert f"cannot serve on 127.0.0.1:{server.port}" in taken.stderr
    with serving(demo, "--remote", env={"SODA_WEB_TOKEN": "opensesame"}) as remote:
        assert remote.url.endswith("/?token=opensesame")
        assert remote.request("GET", "/")[0] == 401
        assert remote.request("GET", "/?token=wrong")[0] == 401
        code, headers, _ = remote.request("GET", "/history?token=opensesame")
        assert code == 303 and headers["location"] == "/history"
        cookie = headers["set-cookie"].split(";", 1)[0]
        assert "httponly" in headers["set-cookie"].lower()
        assert remote.request("GET", "/history", headers={"Cookie": cookie})[0] == 200
        assert remote.request("GET", "/", headers={"Cookie": cookie + "x"})[0] == 401


def test_start_web_serves_beside_the_daemon_and_ends_with_it(demo: Path) -> None:
    started = soda("start", "--web", "--web-port", "0", cwd=demo)
    assert started.returncode == 0, started.stderr
    try:
        line = started.stdout.strip().splitlines()[-1]
        assert line.startswith("soda web: serving http://127.0.0.1:")
        port = int(line.split("127.0.0.1:", 1)[1].split("/", 1)[0])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/now/panel", headers={"Host": f"127.0.0.1:{port}"})
        response = conn.getresponse()
        assert response.status == 200
        assert 'id="running" class="badge on"' in response.read().decode()
        conn.close()
    finally:
        assert soda("stop", cwd=demo).returncode == 0

    def gone() -> bool:
        probe = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            probe.request("GET", "/", headers={"Host": f"127.0.0.1:{port}"})
            probe.getresponse().read()
            return False
        except OSError:
            return True
        finally:
            probe.close()

    wait_for(gone, 15, "the dashboard to end with the daemon")
