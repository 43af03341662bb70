"""Every model a run may call, priced before the run starts (soda.llm.prices).

The strong and fast models answer through `[model] provider` at its endpoint;
each coding CLI the executor may run (`[executor] backend` and `allowed`) calls
its own model through the egress proxy at its upstream. A run whose cost budget
(`[budget] max_cost_usd`, `max_cost_usd_per_day`) could not bind, because one
of them has no price and no token budget (`[budget] max_tokens_per_run`) binds
it instead, is refused at start: `check_priced` raises ConfigError (exit 2) with
one line naming the model and the two fixes. `soda doctor` shows the same
prices, one per model (`price_lines`).
"""

from __future__ import annotations

from dataclasses import dataclass

from soda.agent.executors import executor_for
from soda.config import Config
from soda.errors import ConfigError
from soda.llm.prices import Pricing, endpoint_of, pricing


@dataclass(frozen=True)
class ModelInUse:
    """One model a run may call, where, and how it is priced."""

    role: str
    """Which setting chose it: "model.strong", "model.fast", "executor codex"."""
    endpoint: str | None
    pricing: Pricing


def models_in_use(config: Config, provider: str) -> list[ModelInUse]:
    """The strong and fast models (through `provider`, the session's model's) and
    each coding CLI's model, once each (a model used twice under one price keeps
    its first role)."""
    model = config.model
    prices = model.prices
    endpoint = endpoint_of(model, provider)
    found = [
        ModelInUse(role, endpoint, pricing(name, provider, endpoint, prices))
        for role, name in (("model.strong", model.strong), ("model.fast", model.fast))
    ]
    executor = config.executor
    for name in sorted({executor.backend, *executor.allowed}):
        backend = executor_for(name).backend
        if backend is None:  # soda's own tool loop: the models above
            continue
        route, _ = backend.route(config)
        asked = backend.model(config)
        priced = pricing(asked, route.provider, route.upstream, prices)
        found.append(ModelInUse(f"executor {name}", route.upstream, priced))
    seen: set[tuple[str, str | None]] = set()
    unique = []
    for use in found:
        if (use.pricing.model, use.endpoint) not in seen:
            seen.add((use.pricing.model, use.endpoint))
            unique.append(use)
    return unique


def check_priced(config: Config, provider: str) -> None:
    """ConfigError (one line) when a model the run may call has no price and no
    token budget binds it, so the cost budget could not."""
    if config.budget.max_tokens_per_run:
        return
    unknown = [use for use in models_in_use(config, provider) if not use.pricing.known]
    if not unknown:
        return
    from soda.llm.prices import catalog_version

    named = ", ".join(
        f'"{use.pricing.model}" ({use.role} at {use.endpoint or "its default endpoint"})'
        for use in unknown
    )
    first = unknown[0].pricing.model
    raise ConfigError(
        f"soda.toml: no price for model {named}: neither [model.prices] nor genai-prices"
        f" {catalog_version()} knows it, so [budget] max_cost_usd could not bind; give its"
        f' price ([model.prices."{first}"] input = ..., output = ..., USD per million'
        " tokens) or budget by tokens instead ([budget] max_tokens_per_run = N)"
    )


def price_lines(config: Config, provider: str) -> list[str]:
    """One line per model a run may call: its role, id and price with the source."""
    return [
        f"{use.role} {use.pricing.model}: {use.pricing.describe()}"
        for use in models_in_use(config, provider)
    ]


def doctor_line(config: Config) -> str:
    """`soda doctor`'s prices check: each model's price and its source; ConfigError
    (a FAIL) when a run would be refused for one, with the same line."""
    check_priced(config, config.model.provider)
    return "; ".join(price_lines(config, config.model.provider))
