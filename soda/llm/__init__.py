"""Model providers behind one protocol (`soda.llm.base.Model`), chosen in soda.toml.

May import: config, errors.
"""

from __future__ import annotations

from soda.config import Config
from soda.llm.base import EventSink, Model


def make_model(config: Config, emit: EventSink) -> Model:
    """The provider named by `[model] provider`."""
    provider = config.model.provider
    if provider == "scripted":
        from soda.llm.scripted import ScriptedModel

        assert config.script_path is not None  # config.load checks this
        return ScriptedModel.from_file(config.script_path)
    if provider == "openai":
        from soda.llm.openai_compat import OpenAICompatModel

        return OpenAICompatModel(config.model, emit)
    from soda.llm.anthropic import AnthropicModel

    return AnthropicModel(config.model, emit)
