"""The tracker's issues as fleet runs (`[tracker] fleet`): what
soda.daemon.issue_fleet asks of the Temporal server, one call each.

    run_id   an issue's run id: the repository's and the spec's (as `soda fleet
             submit` derives it), so the same issue is always the same run
    start    start the run unless one of its id is there, running or ended (the
             server refuses a second: never two runs of one issue)
    look     the run as `soda fleet status --json` shows it (its memo: status,
             history, the plan that waits), None when there is no such run
    record   what a writer's `/soda approve` is checked against (the memo)
    send     a person's input as a signal, with the key the workflow takes once
"""

from __future__ import annotations

import contextlib
from typing import Any

from temporalio.client import Client
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from soda.contracts import HumanInput
from soda.errors import InputError
from soda.fleet.client import MemoRecord, call, describe, start
from soda.fleet.state import RunSettings, run_id
from soda.human.commands import RunRecord


class TemporalFleet:
    """soda.daemon.issue_fleet's `Fleet` on the server at `address`."""

    def __init__(self, address: str, namespace: str = "default") -> None:
        self.address = address
        self.namespace = namespace

    def run_id(self, repo_url: str, spec: str) -> str:
        return run_id(repo_url, spec)

    def start(
        self, repo_url: str, spec: str, spec_text: str, config_text: str, max_iterations: int
    ) -> str:
        """Start issue's run (its id); nothing when a run of that id is there."""
        settings = RunSettings(
            repo_url, spec, config_text=config_text, max_iterations=max_iterations,
            spec_text=spec_text,
        )  # fmt: skip
        ident = run_id(repo_url, spec)

        async def go(client: Client) -> str:
            # Started before (a restart after a kill -9): that one is the run.
            with contextlib.suppress(WorkflowAlreadyStartedError):
                await start(client, settings, again=False)
            return ident

        return call(self.address, self.namespace, go)

    def look(self, run: str) -> dict[str, Any] | None:
        async def go(client: Client) -> dict[str, Any] | None:
            try:
                return await describe(client, run)
            except InputError as exc:  # describe's words for any refusal: which was it?
                cause = exc.__cause__
                if isinstance(cause, RPCError) and cause.status != RPCStatusCode.NOT_FOUND:
                    raise cause from None  # the server is not there: transient
                return None

        return call(self.address, self.namespace, go)

    def record(self, described: dict[str, Any]) -> RunRecord:
        return MemoRecord(described)

    def send(self, run: str, item: HumanInput, key: str) -> bool:
        """Signal `item` to `run`; False when the run has ended (nothing sent)."""
        document = item.model_dump(mode="json", exclude_none=True)

        async def go(client: Client) -> bool:
            try:
                await client.get_workflow_handle(run).signal(
                    "human", args=[item.kind, document, key]
                )
            except RPCError as exc:
                if exc.status == RPCStatusCode.NOT_FOUND:
                    return False  # ended (or never was): the server takes no signal
                raise
            return True

        return call(self.address, self.namespace, go)
