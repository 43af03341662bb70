"""Context windows: `model.context_window` (or the table of known models) sizes
every agent's answer budget, tool results and condensing; a first request that
cannot fit is a user error naming the setting (exit 2), never a transient loop;
a server's "no room for max_tokens" (vLLM) lowers max_tokens and asks again;
a prompt the server counts far short of what was sent (Ollama) is announced.

Through the real providers against the local servers, and the real CLI."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from soda.agent.definition import load_agent
from soda.agent.limits import limits_for
from soda.agent.recorder import CallRecorder
from soda.agent.runtime import AgentRunner
from soda.config import Config, ContextConfig, ModelConfig
from soda.errors import ContextTooSmall, MaxTokensTooLarge, PromptTooLong
from soda.events import Events
from soda.llm.anthropic import AnthropicModel
from soda.llm.base import Message, ModelRequest, ToolSpec
from soda.llm.openai_compat import OpenAICompatModel
from soda.llm.windows import DEFAULT_CONTEXT_WINDOW, context_refusal, context_window, known_window
from soda.store import Database, open_db
from tests.conftest import soda
from tests.fakeapi import FakeAPI, bad_request, prompt_too_long, tool_use_response
from tests.fakeopenai import completion, error_reply, json_reply, tool_call_reply
from tests.plan_fakes import new_project, set_key
from tests.test_loop_anthropic import configure

pytest_plugins = ("tests.fakeapi", "tests.fakeopenai")

ASSESSMENT = {"spec_satisfied": False, "confidence": "high", "gaps": [], "summary": "not yet"}
ASSESSOR_INPUTS = {"spec": "# Spec", "claims": {"x": 1}, "verification": "ok"}


class Big:
    """One tool, `fetch`, whose results are `size` characters, numbered."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.count = 0

    def specs(self) -> list[ToolSpec]:
        schema = {"type": "object", "properties": {}, "additionalProperties": False}
        return [ToolSpec("fetch", "fetch", schema)]

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        self.count += 1
        head = f"result {self.count}\n"
        return SimpleNamespace(content=head + "x" * (self.size - len(head)), is_error=False)


@pytest.fixture
def db(tmp_path: Path) -> Database:
    return open_db(tmp_path / "soda.db")


def openai(db: Database, fake: FakeAPI, context: ContextConfig | None = None, **settings: Any):
    base = {
        "provider": "openai",
        "base_url": f"{fake.url}/v1",
        "strong": "qwen2.5-coder:32b",
        "fast": "qwen2.5-coder:32b",
        "max_retries": 0,
    }
    config = Config(model=ModelConfig(**(base | settings)), context=context or ContextConfig())
    model = OpenAICompatModel(config.model, lambda kind, data: None)
    return AgentRunner(model, config, CallRecorder(db, config, "openai", Events(db)))


def bodies(fake: FakeAPI) -> list[dict[str, Any]]:
    return [sent.body for sent in fake.requests]


def events(db: Database, kind: str) -> list[dict[str, Any]]:
    rows = db.execute("SELECT data_json FROM events WHERE kind = ? ORDER BY id", [kind])
    return [json.loads(row[0]) for row in rows]


# --- where a window comes from ---------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "tokens"),
    [
        ("claude-sonnet-4-6", 200_000),
        ("gpt-4o-mini", 128_000),
        ("Qwen/Qwen2.5-Coder-32B-Instruct", 32_768),
        ("qwen2.5-coder:7b", 32_768),
        ("llama3:8b", 8192),
        ("meta-llama/Meta-Llama-3-8B-Instruct", 8192),
        ("llama3.1:8b", 131_072),
        ("o3-mini", 200_000),
    ],
)
def test_known_models_have_their_window(model: str, tokens: int) -> None:
    assert known_window(model) == tokens


def test_a_setting_beats_the_table_and_an_unknown_model_gets_the_default() -> None:
    unknown = ModelConfig(strong="my-finetune", fast="my-finetune")
    assert context_window(unknown, "strong").tokens == DEFAULT_CONTEXT_WINDOW == 8192
    assert "does not know" in context_window(unknown, "strong").source
    one_model = unknown.model_copy(update={"context_window": 16_384})
    assert context_window(one_model, "fast").tokens == 16_384  # the same model: one setting
    assert context_window(one_model, "fast").setting == "model.context_window"
    two = ModelConfig(strong="my-finetune", fast="claude-haiku-4-5", context_window=16_384)
    assert context_window(two, "fast").tokens == 200_000
    assert context_window(two, "fast").setting == "model.context_window_fast"


def test_limits_follow_the_window_with_the_settings_as_upper_bounds() -> None:
    claude = limits_for(Config(), "strong", executor=True)
    assert (claude.max_tokens, claude.tool_result_chars) == (8192, 20_000)  # as they were
    assert claude.session_tokens([]) == 60_000  # [context] executor_session_tokens
    small = Config(model=ModelConfig(context_window=8192))
    assessor = limits_for(small, "strong", executor=False)
    assert (assessor.max_tokens, assessor.tool_result_chars) == (2730, 4096)
    assert assessor.session_tokens([]) == int((8192 - 2730) * 0.75)


# --- every agent sized from its window -------------------------------------------------


def test_a_small_window_sizes_max_tokens_and_tool_results(
    db: Database, fake_openai: FakeAPI
) -> None:
    fake_openai.enqueue(tool_call_reply("fetch", {}), tool_call_reply("submit", ASSESSMENT))
    openai(db, fake_openai, context_window=8192).run(
        load_agent("assessor"), ASSESSOR_INPUTS, Big(10_000)
    )
    first, second = bodies(fake_openai)
    assert first["max_tokens"] == second["max_tokens"] == 8192 // 3
    result = second["messages"][-1]["content"]
    assert "characters cut here" in result and 4096 <= len(result) < 4096 + 400


def test_an_orient_agent_condenses_before_it_outgrows_the_window(
    db: Database, fake_openai: FakeAPI
) -> None:
    """Not only the executor: any agent's older results become one-line notes."""
    fake_openai.enqueue(*[tool_call_reply("fetch", {}) for _ in range(6)])
    fake_openai.enqueue(tool_call_reply("submit", ASSESSMENT))
    openai(db, fake_openai, context_window=8192).run(
        load_agent("assessor"), ASSESSOR_INPUTS, Big(4000)
    )
    [condensed, *_] = events(db, "agent.condensed")
    assert condensed["agent"] == "assessor"
    limits = limits_for(Config(model=ModelConfig(context_window=8192)), "strong", False)
    assert condensed["tokens_after"] <= condensed["budget_tokens"] < 8192 - limits.max_tokens
    last = bodies(fake_openai)[-1]["messages"]
    assert any((m["content"] or "").startswith("[condensed: fetch") for m in last)


# --- the server's window: max_tokens without room, prompts too long ---------------------

VLLM_REQUESTED = (
    "This model's maximum context length is 4096 tokens. However, you requested 4730 "
    "tokens (2000 in the messages, 2730 in the completion). Please reduce the length of "
    "the messages or completion."
)
VLLM_TOO_LARGE = (
    "'max_tokens' or 'max_completion_tokens' is too large: 2730. This model's maximum "
    "context length is 4096 tokens and your request has 2000 input tokens "
    "(2730 > 4096 - 2000)."
)


@pytest.mark.parametrize("message", [VLLM_REQUESTED, VLLM_TOO_LARGE])
def test_vllm_max_tokens_without_room_is_lowered_and_asked_again(
    db: Database, fake_openai: FakeAPI, message: str
) -> None:
    fake_openai.enqueue(error_reply(400, message), json_reply(ASSESSMENT))
    answer = openai(db, fake_openai, context_window=8192).run(
        load_agent("assessor"), ASSESSOR_INPUTS, None
    )
    assert answer.value.summary == "not yet"
    assert [body["max_tokens"] for body in bodies(fake_openai)] == [2730, 4096 - 2000]
    [lowered] = events(db, "agent.soft_failure")
    assert lowered == {
        "agent": "assessor",
        "failure": "max_tokens_lowered",
        "turn": 1,
        "max_tokens": 2730,
        "lowered_to": 2096,
    }


def test_refusals_for_length_are_told_apart() -> None:
    requested = context_refusal(400, VLLM_REQUESTED)
    assert isinstance(requested, MaxTokensTooLarge) and requested.room == 2096
    prompt = context_refusal(
        400,
        "This model's maximum context length is 4096 tokens. However, you requested 5120 "
        "tokens (5000 in the messages, 120 in the completion).",
    )
    assert isinstance(prompt, PromptTooLong)
    cap = context_refusal(
        400, "max_tokens is too large: 100000. This model supports at most 16384 completion "
        "tokens, whereas you provided 100000.",
    )  # fmt: skip
    assert isinstance(cap, MaxTokensTooLarge) and cap.room == 16384
    llama_cpp = context_refusal(400, "the request exceeds the available context size")
    assert isinstance(llama_cpp, PromptTooLong)
    assert context_refusal(400, "messages: field required") is None


def test_anthropic_no_room_for_max_tokens_is_lowered_and_asked_again(
    db: Database, fake_api: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")
    config = Config(model=ModelConfig(base_url=fake_api.url, max_retries=0, max_tokens=8000))
    runner = AgentRunner(
        AnthropicModel(config.model, lambda kind, data: None),
        config,
        CallRecorder(db, config, "anthropic", Events(db)),
    )
    fake_api.enqueue(
        bad_request(
            "input length and `max_tokens` exceed context limit: 197000 + 8000 > 200000, "
            "decrease input length or `max_tokens` and try again"
        ),
        tool_use_response("submit", ASSESSMENT),
    )
    runner.run(load_agent("assessor"), ASSESSOR_INPUTS, Big(10))
    assert [body["max_tokens"] for body in bodies(fake_api)] == [8000, 3000]


def test_reasoning_models_are_sent_max_completion_tokens(fake_openai: FakeAPI) -> None:
    config = ModelConfig(provider="openai", base_url=f"{fake_openai.url}/v1", max_retries=0)
    answer = ToolSpec("submit", "answer", {"type": "object", "properties": {}})
    for model in ("o3-mini", "qwen2.5-coder:32b"):
        fake_openai.enqueue(json_reply({}))
        OpenAICompatModel(config, lambda kind, data: None).complete(
            ModelRequest("a", model, "s", [Message("user", "hi")], [answer], "submit", 500)
        )
    reasoning, local = bodies(fake_openai)
    assert reasoning["max_completion_tokens"] == 500 and "max_tokens" not in reasoning
    assert local["max_tokens"] == 500 and "max_completion_tokens" not in local


def test_a_prompt_the_server_counts_far_short_is_announced(fake_openai: FakeAPI) -> None:
    """Ollama past its num_ctx cuts the prompt and counts only what it kept."""
    config = ModelConfig(provider="openai", base_url=f"{fake_openai.url}/v1", max_retries=0)
    seen: list[tuple[str, dict[str, Any]]] = []
    model = OpenAICompatModel(config, lambda kind, data: seen.append((kind, data)))
    answer = ToolSpec("submit", "answer", {"type": "object", "properties": {}})
    long = [Message("user", "word " * 4000)]  # about 5,000 tokens by soda's estimate
    for counted in (4900, 2048):
        fake_openai.enqueue(completion({"role": "assistant", "content": "{}"}, "stop", counted))
        model.complete(ModelRequest("a", "llama3", "s", long, [answer], "submit", 100))
    [(kind, data)] = seen
    assert kind == "provider.prompt_undercounted" and data["prompt_tokens"] == 2048
    assert data["estimated_tokens"] > 2 * 2048


# --- a first request that cannot fit: the person's to fix --------------------------------


def test_a_first_request_past_the_window_is_refused_before_it_is_sent(
    db: Database, fake_openai: FakeAPI
) -> None:
    with pytest.raises(ContextTooSmall, match="set model.context_window") as caught:
        openai(db, fake_openai, context_window=1024).run(
            load_agent("assessor"), ASSESSOR_INPUTS, Big(10)
        )
    assert caught.value.exit_code == 2 and fake_openai.requests == []
    assert "1,024 tokens (from model.context_window)" in str(caught.value)


def test_a_window_too_small_for_orient_ends_the_run_with_exit_2(tmp_path: Path) -> None:
    root = new_project(tmp_path)
    set_key(root, "context_window", "2048")
    done = soda("run", "--once", cwd=root)
    assert done.returncode == 2, done.stdout + done.stderr
    [line] = [line for line in done.stderr.splitlines() if "context window" in line]
    assert "agent verifier's first request is about" in line
    assert "set model.context_window" in line and "Traceback" not in done.stderr
    db = open_db(root / "state" / "soda.db")
    assert db.execute("SELECT count(*) FROM agent_calls").fetchone()[0] == 0
    assert db.execute("SELECT outcome FROM iterations").fetchone()[0] == "error"
    [shrunk] = events(db, "agent.inputs_shrunk")
    assert shrunk["agent"] == "verifier" and shrunk["fits"] is False


def test_a_first_request_the_server_refuses_ends_with_exit_2_not_a_transient_loop(
    tmp_path: Path, fake_api: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-real")
    root = new_project(tmp_path)
    configure(root, fake_api)
    fake_api.enqueue(prompt_too_long())
    done = soda("run", "--once", cwd=root)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "refused by the model server as too long" in done.stderr
    assert "model.context_window" in done.stderr and "transient" not in done.stdout
    assert len(fake_api.requests) == 1  # nothing was retried
