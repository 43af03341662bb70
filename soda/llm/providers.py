"""The model providers: one registry, the only list of their names.

`make_model` (soda.llm) builds the provider `[model] provider` names from its
entry; `soda doctor` checks what the entry says the provider needs; the CLI and
the daemon refuse an unknown name when they load soda.toml (`check_provider`),
with one line naming the key and the known names. soda.config sits below
soda.llm, so the config field is a plain string and the check lives here.

Adding a provider: its module in soda/llm/, one entry in `PROVIDERS`, and its
name in the `[model] provider` docstring (checked on import, so `soda init`'s
commented soda.toml lists every provider). Each entry builds its model with a
local import: importing the registry stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from soda.config import Config, ModelConfig
from soda.errors import ConfigError
from soda.llm.base import EventSink, Model


@dataclass(frozen=True)
class Provider:
    """One provider: how to build its model and what `soda doctor` checks."""

    name: str
    """The `[model] provider` value that chooses it."""
    build: Callable[[Config, EventSink], Model]
    """Makes the model from the whole config (imports the provider's module)."""
    label: str
    """How messages name it, e.g. "export your Anthropic API key"."""
    needs_key: bool = False
    """doctor fails unless the variable named by `[model] api_key_env` is set."""
    probes_window: bool = False
    """Its servers may cut a prompt longer than their window silently (Ollama):
    `doctor --ping` sends a request the size of soda's largest to see."""
    offline: Callable[[Config], str] | None = None
    """For a provider that answers without a network: what doctor says about it
    (there is no key to check and nothing to ping). None: a networked provider."""


def _anthropic(config: Config, emit: EventSink) -> Model:
    from soda.llm.anthropic import AnthropicModel

    return AnthropicModel(config.model, emit)


def _openai(config: Config, emit: EventSink) -> Model:
    from soda.llm.openai_compat import OpenAICompatModel

    return OpenAICompatModel(config.model, emit)


def _scripted(config: Config, emit: EventSink) -> Model:
    from soda.llm.scripted import ScriptedModel

    assert config.script_path is not None  # config.load checks this
    return ScriptedModel.from_file(config.script_path)


PROVIDERS: dict[str, Provider] = {
    provider.name: provider
    for provider in (
        Provider("anthropic", _anthropic, "Anthropic", needs_key=True),
        # Local servers (Ollama, vLLM, llama.cpp) usually need no key.
        Provider("openai", _openai, "OpenAI-compatible", probes_window=True),
        Provider(
            "scripted",
            _scripted,
            "scripted",
            offline=lambda config: f"scripted model replaying {config.script_path} (no network)",
        ),
    )
}


def provider_for(name: str) -> Provider:
    """The registry's entry for `name`; ConfigError naming the key and the known names."""
    provider = PROVIDERS.get(name)
    if provider is None:
        known = ", ".join(sorted(PROVIDERS))
        raise ConfigError(f"soda.toml: model.provider: unknown provider {name!r} (known: {known})")
    return provider


def check_provider(config: Config) -> Config:
    """`config`, once its `[model] provider` is one the registry knows (ConfigError
    otherwise): what loading soda.toml checks besides soda.config's own checks."""
    provider_for(config.model.provider)
    return config


def _check_documented() -> None:
    """Every provider is named in the `[model] provider` docstring, the text
    `soda init` writes into soda.toml."""
    described = ModelConfig.model_fields["provider"].description or ""
    missing = [name for name in PROVIDERS if f'"{name}"' not in described]
    if missing:
        raise RuntimeError(f"providers missing from the [model] provider docstring: {missing}")


_check_documented()
