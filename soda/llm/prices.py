"""What a model's tokens cost, and where that price came from.

A call is priced by the first of these that knows the model:

    source              when                                         cost
    soda.toml           `[model.prices."ID"]` names it               its rates
    local               a model on this machine: a loopback endpoint  $0
                        (127.0.0.0/8, localhost, ::1) or a fake
                        (the scripted or function provider)
    genai-prices X.Y.Z  the genai-prices package's bundled data      its rates, by
                        (offline; matched by endpoint, provider,     date and tier
                        then the model id alone)
    unknown             none of them                                 $0

A person's price always wins (a proxy on localhost in front of a paid API needs
one). An unknown price is never silently final: starting a run with such a
model and no token budget is refused (`soda.agent.pricing`). Every recorded
call keeps its source (`agent_calls.price_source`), and `soda cost` shows it.

genai-prices is imported on the first lookup (it takes a second or more to
load its tables), and each lookup is remembered per model and endpoint.
"""

from __future__ import annotations

import functools
import ipaddress
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from soda.config import ModelConfig, Price
from soda.llm.base import Usage

if TYPE_CHECKING:
    from genai_prices.types import ModelInfo, Provider
    from genai_prices.types import Usage as CatalogUsage

    CatalogMatch = tuple[Provider, ModelInfo]

OVERRIDE = "soda.toml"
LOCAL = "local"
UNKNOWN = "unknown"
CATALOG = "genai-prices"
"""The sources' names; the catalog's is followed by its version."""

FREE_PROVIDERS = frozenset({"scripted", "function"})
"""Providers that answer from this process (the demo's replay, tests' fakes)."""

DEFAULT_ENDPOINTS = {"anthropic": "https://api.anthropic.com"}
"""Where a provider's calls go when no base URL is set (openai needs one)."""


@dataclass(frozen=True)
class Pricing:
    """How one model's calls at one endpoint are priced."""

    model: str
    source: str
    """"soda.toml", "local", "genai-prices X.Y.Z" or "unknown"."""
    rates: Price | None = None
    """USD per million tokens: the person's, or the catalog's for a short prompt
    (a long one may cost more: the catalog's tiers apply per call); None when
    free or unknown."""
    catalog_model: str = ""
    """The catalog's provider and model it matched, e.g. "openai gpt-5"."""
    match: CatalogMatch | None = field(default=None, compare=False, repr=False)
    """The catalog's entries themselves: each call is priced by them, at its
    date and size."""

    @property
    def known(self) -> bool:
        return self.source != UNKNOWN

    def cost(self, usage: Usage) -> float:
        """USD for `usage`; 0 when local or unknown."""
        if self.source == OVERRIDE:
            return usage.cost(self.rates)
        if self.match is not None:
            return _catalog_cost(self.match, usage)
        return 0.0

    def describe(self) -> str:
        """E.g. "$3.00 in, $15.00 out per million tokens (genai-prices 0.2.3)"."""
        if self.source == LOCAL:
            return "free (local)"
        if self.rates is None:
            return "no price (unknown)"
        rates = self.rates
        named = self.catalog_model.partition(" ")[2]
        matched = f", as {self.catalog_model}" if named and named != self.model else ""
        return (
            f"${rates.input:.2f} in, ${rates.output:.2f} out per million tokens"
            f" ({self.source}{matched})"
        )


def endpoint_of(model: ModelConfig, provider: str) -> str | None:
    """Where the session's own model calls go: `[model] base_url`, for Anthropic
    also ANTHROPIC_BASE_URL (as the provider reads it), else the provider's own."""
    if provider == "anthropic":
        base = model.base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
        return base or DEFAULT_ENDPOINTS["anthropic"]
    return model.base_url


def is_loopback(endpoint: str | None) -> bool:
    """Whether `endpoint` (a URL) is on this machine: 127.0.0.0/8, localhost, ::1."""
    if not endpoint:
        return False
    host = (urlsplit(endpoint if "//" in endpoint else f"//{endpoint}").hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def pricing(
    model: str, provider: str, endpoint: str | None, overrides: dict[str, Price]
) -> Pricing:
    """How calls to `model` through `provider` at `endpoint` are priced (see the
    module's table); `overrides` is `[model.prices]`."""
    override = overrides.get(model)
    if override is not None:
        return Pricing(model, OVERRIDE, override)
    if provider in FREE_PROVIDERS or is_loopback(endpoint):
        return Pricing(model, LOCAL)
    return _catalog_pricing(model, provider, endpoint)


def catalog_version() -> str:
    """The installed genai-prices' version (its data ships with it)."""
    from genai_prices import __version__

    return __version__


@functools.lru_cache(maxsize=256)
def _catalog_pricing(model: str, provider: str, endpoint: str | None) -> Pricing:
    found = _catalog_lookup(model, provider, endpoint)
    if found is None:
        return Pricing(model, UNKNOWN)
    catalog_provider, matched = found
    per_thousand = {
        "input": Usage(input_tokens=1000),
        "output": Usage(output_tokens=1000),
        "cache_write": Usage(cache_creation_tokens=1000),
        "cache_read": Usage(cache_read_tokens=1000),
    }
    # Rates from a thousand tokens, not a million: a long prompt may be priced
    # at a higher tier, and these are the rates most calls pay.
    rates = {name: _catalog_cost(found, usage) * 1000 for name, usage in per_thousand.items()}
    return Pricing(
        model,
        f"{CATALOG} {catalog_version()}",
        Price(**rates),
        f"{catalog_provider.id} {matched.id}",
        found,
    )


def _catalog_lookup(model: str, provider: str, endpoint: str | None) -> CatalogMatch | None:
    """The catalog's provider and model for `model`: by the endpoint's URL, then
    by soda's provider name, then by the model id alone; None when none knows it."""
    from genai_prices.data_snapshot import get_snapshot

    snapshot = get_snapshot()
    attempts: list[tuple[str | None, str | None]] = []
    if endpoint:
        attempts.append((None, endpoint))
    if provider not in FREE_PROVIDERS:
        attempts.append((provider, None))
    attempts.append((None, None))
    for provider_id, url in attempts:
        try:
            return snapshot.find_provider_model(model, None, provider_id, url)
        except LookupError:
            continue
    return None


def _catalog_cost(match: CatalogMatch, usage: Usage) -> float:
    catalog_provider, matched = match
    return float(matched.calc_price(_catalog_usage(usage), catalog_provider).total_price)


def _catalog_usage(usage: Usage) -> CatalogUsage:
    """soda's usage in the catalog's terms: its input counts cache reads and
    writes too (soda's, as Anthropic's, does not)."""
    from genai_prices import Usage as CatalogUsage

    cached = usage.cache_creation_tokens + usage.cache_read_tokens
    return CatalogUsage(
        input_tokens=usage.input_tokens + cached,
        output_tokens=usage.output_tokens,
        cache_write_tokens=usage.cache_creation_tokens,
        cache_read_tokens=usage.cache_read_tokens,
    )
