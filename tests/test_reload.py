"""A config reload (SIGHUP) swaps one config that every holder reads: the daemon,
the session, its agent runner and its call recorder share one `LiveConfig`, and
the session's jail is made again from the new [sandbox]. A refused reload changes
nothing. A real project, state and lock, the daemon in this process (the signal
itself: tests/test_daemon.py)."""

from __future__ import annotations

import json
from pathlib import Path

from soda.cli.demo import prepare
from soda.config import Config
from soda.daemon.process import Daemon
from soda.llm.base import ModelResponse, Usage
from soda.loop.session import Session
from soda.system.lock import release_lock


def holders(daemon: Daemon, session: Session) -> dict[str, Config]:
    """Everything that holds the config, and the config each one reads."""
    return {
        "daemon": daemon.config,
        "session": session.config,
        "runner": session.runner.config,
        "recorder": session.recorder.config,
    }


def reloaded(session: Session) -> list[dict]:
    rows = session.db.execute(
        "SELECT kind, data_json FROM events WHERE kind LIKE 'config.%' ORDER BY id"
    )
    return [{"kind": kind, **json.loads(data)} for kind, data in rows]


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))


def test_after_a_reload_every_holder_reads_the_new_config(tmp_path: Path) -> None:
    config_path = prepare(tmp_path / "project")
    daemon = Daemon(config_path)
    run = daemon._preflight()
    session = run._session  # the loop's own: the test reads its record
    try:
        # One reference, not copies: a holder added later reads through it too.
        assert session.live is daemon.live
        assert session.runner.live is daemon.live and session.recorder.live is daemon.live
        before = daemon.config
        assert all(config is before for config in holders(daemon, session).values())
        old_jail = session.jail
        assert old_jail.network is False and session.jail is old_jail  # made once, kept

        edit(config_path, "max_turns = 40", "max_turns = 7")
        edit(config_path, "max_cost_usd = 10.0", "max_cost_usd = 2.5")
        edit(config_path, "network = false", "network = true")
        with config_path.open("a") as toml:  # a price of one's own wins, even for a fake
            toml.write('\n[model.prices."scripted"]\ninput = 1.0\noutput = 5.0\n')
        daemon._reload(run)

        after = daemon.config
        assert after is not before
        assert {name: config is after for name, config in holders(daemon, session).items()} == {
            "daemon": True,
            "session": True,
            "runner": True,
            "recorder": True,
        }
        assert session.runner.config.model.max_turns == 7
        assert session.recorder.config.budget.max_cost_usd == 2.5
        assert session.jail is not old_jail and session.jail.network is True
        # The recorder prices a call by the new [model] prices (scripted was free).
        session.start_run()
        answer = ModelResponse("", [], "end_turn", Usage(input_tokens=1_000_000), "scripted")
        session.recorder("verifier", answer, 1)
        assert session.recorder.cost_usd == 1.0
        assert [event["kind"] for event in reloaded(session)] == ["config.reloaded"]

        edit(config_path, 'provider = "scripted"\n', 'provider = "gemini"\n')
        daemon._reload(run)  # refused: nobody's config changes

        assert all(config is after for config in holders(daemon, session).values())
        refused = reloaded(session)[-1]
        assert refused["kind"] == "config.reload_failed"
        assert "model.provider: unknown provider 'gemini'" in refused["error"]
    finally:
        session.finish_run("stopped", "test over")
        release_lock(daemon.config.state_dir)
        session.db.conn.close()
