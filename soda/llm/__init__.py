"""Model providers behind one protocol (`soda.llm.base.Model`), chosen in soda.toml
from the registry in `soda.llm.providers`.

May import: config, errors.
"""

from __future__ import annotations

from soda.config import Config
from soda.llm.base import EventSink, Model
from soda.llm.providers import provider_for


def make_model(config: Config, emit: EventSink) -> Model:
    """The provider named by `[model] provider`; ConfigError if the registry does
    not know it."""
    return provider_for(config.model.provider).build(config, emit)
