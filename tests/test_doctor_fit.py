"""`soda doctor`'s fit check: the largest first request against the model's
context window, and (with --ping, for a server that may cut a long prompt
silently) a probe of that size whose counted prompt tokens are compared with
what was sent. A real project, the OpenAI-compatible provider against the local
chat-completions server."""

from __future__ import annotations

from pathlib import Path

import pytest

from soda.cli.doctor import run_checks
from tests.fakeapi import FakeAPI
from tests.fakeopenai import completion, json_reply
from tests.sample import sample_project

pytest_plugins = ("tests.fakeopenai",)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return sample_project(tmp_path)


def configure(root: Path, *replacements: tuple[str, str]) -> None:
    config = root / "soda.toml"
    text = config.read_text()
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new)
    config.write_text(text)


def local_server(root: Path, fake: FakeAPI, *extra: tuple[str, str]) -> None:
    configure(
        root,
        ('provider = "scripted"', 'provider = "openai"'),
        ('strong = "scripted"', 'strong = "qwen2.5-coder:32b"'),
        ('fast = "scripted"', 'fast = "qwen2.5-coder:32b"'),
        ("# base_url = (not set)", f'base_url = "{fake.url}/v1"'),
        ("max_retries = 4", "max_retries = 0"),
        *extra,
    )


def fit(root: Path, ping: bool = False):
    return {check.name: check for check in run_checks(root, ping=ping)}["fit"]


def test_a_window_too_small_fails_naming_the_setting(project: Path) -> None:
    configure(project, ("# context_window = (not set)", "context_window = 4096"))
    check = fit(project)
    assert not check.ok
    assert "largest first request: " in check.detail
    assert "of a 4,096-token window (from model.context_window): it does not fit" in check.detail


def test_a_roomy_window_passes_and_says_what_it_weighed(project: Path) -> None:
    check = fit(project)  # the demo's scripted model: sized like Claude's 200k
    assert check.ok and not check.warn, check.detail
    assert (
        "200,000-token window" in check.detail and "1,500 for an iteration's inputs" in check.detail
    )


def test_a_local_server_without_a_window_setting_is_warned(
    project: Path, fake_openai: FakeAPI
) -> None:
    local_server(project, fake_openai)
    check = fit(project)
    assert check.ok and check.warn
    assert "model.context_window is not set" in check.detail and "num_ctx" in check.detail
    assert fake_openai.requests == []  # without --ping nothing is sent


def test_ping_finds_a_server_that_cuts_the_prompt_silently(
    project: Path, fake_openai: FakeAPI
) -> None:
    local_server(project, fake_openai, ("# context_window = (not set)", "context_window = 32768"))
    # The provider's ping, then the probe: counted as if cut at Ollama's old 2048.
    fake_openai.enqueue(json_reply({"ok": True}))
    fake_openai.enqueue(completion({"role": "assistant", "content": '{"ok": true}'}, "stop", 2048))
    check = fit(project, ping=True)
    assert not check.ok
    assert "counted 2,048 prompt tokens" in check.detail and "num_ctx" in check.detail
    probe = fake_openai.requests[-1].body
    sent = sum(len(m["content"] or "") for m in probe["messages"])
    assert sent > 4 * 2 * 2048  # a request the size of soda's largest first request


def test_ping_passes_when_the_server_reads_the_probe_whole(
    project: Path, fake_openai: FakeAPI
) -> None:
    local_server(project, fake_openai, ("# context_window = (not set)", "context_window = 32768"))
    fake_openai.enqueue(json_reply({"ok": True}))
    fake_openai.enqueue(completion({"role": "assistant", "content": '{"ok": true}'}, "stop", 5000))
    check = fit(project, ping=True)
    assert check.ok and not check.warn, check.detail
    assert "the server read a probe of about" in check.detail
