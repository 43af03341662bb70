"""Every model call stored in `agent_calls` with its price and where that came
from, the iteration's totals, and the budget: `CallRecorder` raises
BudgetExhausted once a [budget] limit is passed."""

from __future__ import annotations

from typing import Any

from sqlite_utils import Database

from soda.agent.request_log import RequestLog
from soda.config import Config, LiveConfig
from soda.events import Events
from soda.llm.base import ModelRequest, ModelResponse, safe_response
from soda.llm.prices import Pricing, endpoint_of, pricing
from soda.store import agent_calls


class CallRecorder:
    """Stores every model call in agent_calls, keeps the iteration's totals, and
    stops the run (BudgetExhausted) once a [budget] limit is passed."""

    def __init__(
        self,
        db: Database,
        config: Config | LiveConfig,
        provider: str,
        events: Events,
        run_id: int | None = None,
        iteration_id: int | None = None,
    ) -> None:
        self.db = db
        self.live = LiveConfig.of(config)
        self.provider = provider
        self.events = events
        self.run_id = run_id
        self.iteration_id = iteration_id
        self.requests: RequestLog | None = None
        """Where each call's request and answer go, with `model.log_requests`."""
        self.reset()

    def for_scope(self, events: Events) -> CallRecorder:
        """A recorder of its own for the run or iteration `events` is bound to:
        its calls are stored against that scope, its totals start at zero."""
        recorder = CallRecorder(
            self.db, self.live, self.provider, events, events.run_id, events.iteration_id
        )
        model = self.config.model
        if model.log_requests and events.iteration is not None:
            state = self.config.state_dir
            recorder.requests = RequestLog(state, events.iteration.number, model.log_requests_keep)
        return recorder

    @property
    def config(self) -> Config:
        """The current config (a reload swaps it in `live`)."""
        return self.live.current

    def reset(self) -> None:
        self.tokens_in = 0
        self.tokens_out = 0
        self.cost_usd = 0.0

    def __call__(
        self,
        agent: str,
        response: ModelResponse,
        turn: int,
        request: ModelRequest | None = None,
        provider: str | None = None,
        endpoint: str | None = None,
    ) -> None:
        """Store one call, priced (soda.llm.prices); `provider` and `endpoint` name
        another provider and address than the session's model's (a coding CLI's
        calls through the egress proxy)."""
        # A lone surrogate in the raw answer could be neither JSON-encoded as UTF-8
        # nor stored by SQLite: it becomes U+FFFD on the way in.
        response = safe_response(response)
        if self.requests is not None and request is not None:
            self.requests.write(agent, turn, request, response)
        usage = response.usage
        priced = self.pricing(response.model, provider, endpoint)
        cost = priced.cost(usage)
        agent_calls.record(
            self.db, self.run_id, self.iteration_id, agent, provider or self.provider, turn,
            response, cost, priced.source,
        )  # fmt: skip
        self.tokens_in += usage.input_tokens + usage.cache_creation_tokens + usage.cache_read_tokens
        self.tokens_out += usage.output_tokens
        self.cost_usd += cost
        self.events.emit(
            "agent.turn",
            {
                "agent": agent,
                "turn": turn,
                "model": response.model,
                "tokens_in": usage.input_tokens
                + usage.cache_creation_tokens
                + usage.cache_read_tokens,
                "tokens_out": usage.output_tokens,
                "cost_usd": cost,
                "price_source": priced.source,
            },
        )
        self._check_budget()

    def pricing(
        self, model: str, provider: str | None = None, endpoint: str | None = None
    ) -> Pricing:
        """How a call to `model` is priced: by the session's provider at its
        endpoint, or by the `provider` at `endpoint` a coding CLI's call went to."""
        config = self.config
        if provider is None:
            provider = self.provider
            endpoint = endpoint_of(config.model, provider)
        return pricing(model, provider, endpoint, config.model.prices)

    def note(self, agent: str, failure: str, data: dict[str, Any]) -> None:
        """A soft failure handed back to the model: an `agent.soft_failure` event."""
        self.events.emit("agent.soft_failure", {"agent": agent, "failure": failure, **data})

    def event(self, kind: str, data: dict[str, Any]) -> None:
        """An agent run's own event (`agent.start`, `agent.end`), for the live view."""
        self.events.emit(kind, data)

    def run_cost(self) -> float:
        return agent_calls.run_cost(self.db, self.run_id)

    def run_tokens(self) -> int:
        return agent_calls.run_tokens(self.db, self.run_id)

    def _check_budget(self) -> None:
        """BudgetExhausted once this run's, today's or this iteration's budget is
        passed (soda.agent.budget says which, and how to raise or reset it)."""
        from soda.agent.budget import check

        tokens = self.tokens_in + self.tokens_out
        check(self.config, self.db, self.run_cost(), tokens, self.run_tokens())
