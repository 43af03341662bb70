"""The workflow of one repository and spec: decisions only, no I/O.

Each pass places the run on a worker if it has none (an activity on the shared
queue that a worker with a free slot takes), runs one iteration as an activity
on that worker's own queue (heartbeating), keeps the summary, and continues as
new: a run's history never grows past one iteration's events. A worker that
stops heartbeating (or never starts the iteration) loses the run: the next pass
places it on another worker, which rebuilds from this state. After STUCK or
HALT, and while paused, the run waits for a person's signal holding no worker.
A plan that waits for approval waits here too, on a durable timer: until a
verdict on it (or an edit, or stop) comes or its deadline passes, after which
the next iteration, on any worker, acts on it (soda.fleet.approval). A run
that ends tells the worker that last held it to remove its checkout.
"""

from __future__ import annotations

import builtins
import contextlib
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, TimeoutError

with workflow.unsafe.imports_passed_through():
    from soda.contracts.outcomes import Ending, FleetStatus, IterationOutcome
    from soda.fleet.state import (
        MAX_HEARD,
        MAX_HISTORY,
        SHARED_QUEUE,
        VERDICT_KINDS,
        WORKFLOW_TYPE,
        ApprovalWait,
        HumanSignal,
        IterationReport,
        IterationRequest,
        IterationSummary,
        Placement,
        RunState,
        approval_memo,
        history_rows,
        status_of,
    )
    from soda.human.routing import Control
    from soda.loop.policy import Host, Next, after

PLACE_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=1.5,
    maximum_interval=timedelta(seconds=0.5),
)
"""A worker with no free slot refuses a placement; another (or a later) one takes
it, within half a second of a slot coming free."""
TRANSIENT_WAIT = timedelta(seconds=30)
RELEASE_WAIT = timedelta(seconds=5)
"""How long a waiting run's `release` may take to start, and to run (best effort)."""
FORGET_WAIT = timedelta(seconds=30)
"""The same for an ended run's, which also removes its checkout from the cache."""


@workflow.defn(name=WORKFLOW_TYPE)
class SodaRun:
    @workflow.init
    def __init__(self, state: RunState) -> None:
        # The state is there before any signal is handled: one that comes with the
        # start (or right after a continue-as-new) is applied, never dropped.
        self.state: RunState | None = state
        self.status = FleetStatus.STARTING

    @workflow.run
    async def run(self, state: RunState) -> str:
        state = self.state or state  # the one the first signals changed
        self.state = state
        state.token = state.token or workflow.info().run_id  # the first execution's
        while True:
            if state.stopping:
                return await self._end(FleetStatus.STOPPED)
            if state.paused or state.waiting_for is not None:
                await self._release()
                self._show(FleetStatus.PAUSED if state.paused else FleetStatus.WAITING)
                await workflow.wait_condition(lambda: self._may_go(state))
                continue
            if state.approval is not None and not self._verdict_due(state):
                await self._release()
                self._show(FleetStatus.WAITING)
                await self._wait_for_verdict(state, state.approval)
                continue
            if state.last_number >= state.settings.max_iterations:
                return await self._end(FleetStatus.STUCK)
            if state.placement is None:
                self._show(FleetStatus.PLACING)
                state.placement = await workflow.execute_activity(
                    "place",
                    workflow.info().workflow_id,
                    task_queue=SHARED_QUEUE,
                    start_to_close_timeout=timedelta(seconds=10),
                    retry_policy=PLACE_RETRY,
                    result_type=Placement,
                )
                last = state.history[-1].worker if state.history else None
                if state.placement.worker != last:  # another worker's record is not this run's
                    state.fresh = True
            self._show(FleetStatus.RUNNING)
            report = await self._iterate(state, state.placement)
            if report is None and state.window_opens is not None:
                await self._wait_for_window(state, state.window_opens)
                continue
            if report is None and state.waiting_for is not None:
                continue
            if report is None:  # the worker was lost: place the run again
                state.placement, state.fresh = None, True
                state.moves += 1
                continue
            then = self._keep(state, report)
            if then is Next.END:
                return await self._end(FleetStatus.DONE)
            if then is Next.RETRY_LATER:
                self._show(FleetStatus.RETRYING)
                await workflow.sleep(TRANSIENT_WAIT)
            await workflow.wait_condition(workflow.all_handlers_finished)
            workflow.continue_as_new(state)

    async def _iterate(self, state: RunState, placement: Placement) -> IterationReport | None:
        request = IterationRequest(
            workflow.info().workflow_id,
            state.settings,
            state.last_number + 1,
            state.fresh,
            state.history,
            list(state.pending),
            state.learnings,
            tasks=state.tasks,
            token=state.token,
        )
        request.approval = state.approval
        try:
            report: IterationReport = await workflow.execute_activity(
                "iterate",
                request,
                task_queue=placement.queue,
                schedule_to_start_timeout=timedelta(seconds=state.settings.place_seconds),
                start_to_close_timeout=timedelta(hours=6),
                heartbeat_timeout=timedelta(seconds=state.settings.heartbeat_seconds),
                retry_policy=RetryPolicy(maximum_attempts=1),
                result_type=IterationReport,
            )
            state.fresh = False  # the worker's record holds this iteration
            return report
        except ActivityError as exc:
            if isinstance(exc.cause, TimeoutError):
                return None
            cause = exc.cause
            if isinstance(cause, ApplicationError) and cause.type == "OutsideWindow":
                state.window_opens = float(cause.details[0])  # nothing ran: the record holds
                return None
            state.fresh = True  # the attempt broke off: its local record is not trusted
            message = cause.message if isinstance(cause, ApplicationError) else str(exc)
            if isinstance(cause, ApplicationError) and cause.type == "UserError":
                # A person must fix something (the repository's soda.toml, its URL):
                # the run waits for them, holding no worker.
                state.waiting_for = f"a person to fix: {message} (then soda fleet resume)"
                return None
            if isinstance(cause, ApplicationError) and cause.type == "TransientError":
                ending, reason = Ending.TRANSIENT, message  # e.g. a push that never went through
            else:
                ending, reason = Ending.HALT, f"the iteration crashed: {message}"
            summary = IterationSummary(request.number, ending, reason, worker=placement.worker)
            report = IterationReport(
                summary,
                [],
                state.learnings,
                state.open_tasks,
                None,
                tasks=state.tasks,
            )
            report.approval = state.approval  # a plan that waited still waits
            return report

    async def _wait_for_verdict(self, state: RunState, approval: ApprovalWait) -> None:
        """A durable timer for the plan that waits for approval: it ends when a
        person's verdict (or an edit, or stop) comes, or at the deadline, after
        which the next iteration rejects the plan (the timeout's policy, not a
        person's word). Whatever the workers do meanwhile, the deadline holds."""
        left = approval.deadline - workflow.now().timestamp()
        if left > 0:
            try:
                await workflow.wait_condition(
                    lambda: self._verdict_due(state) or state.paused,
                    timeout=timedelta(seconds=left),
                )
                return
            except builtins.TimeoutError:  # (temporalio's TimeoutError is an activity's)
                pass
        approval.expired = True

    async def _wait_for_window(self, state: RunState, opens: float) -> None:
        """Outside the run's working windows, as the daemon: no worker held until
        the next one opens (or a person pauses or stops the run)."""
        await self._release()
        self._show(FleetStatus.WAITING)
        left = opens - workflow.now().timestamp()
        if left > 0:
            with contextlib.suppress(builtins.TimeoutError):
                await workflow.wait_condition(
                    lambda: state.stopping or state.paused, timeout=timedelta(seconds=left)
                )
        state.window_opens = None

    def _verdict_due(self, state: RunState) -> bool:
        """The waiting plan's verdict can be taken: a person's is pending (its
        iteration named), the deadline passed, or the run stops."""
        approval = state.approval
        if approval is None or approval.expired or state.stopping:
            return True
        return any(
            item.kind in VERDICT_KINDS and item.document.get("target") == approval.iteration
            for item in state.pending
        )

    def _keep(self, state: RunState, report: IterationReport) -> Next:
        """Keep what the iteration reports; what comes next is the fleet's row of
        soda.loop.policy (its worker ran `notify_command` already)."""
        summary = report.summary
        state.history = [*state.history, summary][-MAX_HISTORY:]
        delivered = set(report.delivered)
        state.pending = [item for item in state.pending if item.seq not in delivered]
        state.learnings = report.learnings
        state.open_tasks = report.open_tasks
        state.tasks = report.tasks
        state.tokens += summary.tokens
        state.cost_usd += summary.cost_usd
        state.approval = report.approval  # the worker's record says whether a plan waits
        suspended = summary.outcome == IterationOutcome.AWAITING_APPROVAL
        then = after(
            Host.FLEET,
            Ending(summary.ending),
            suspended=suspended,
            inputs_waiting=bool(state.pending),
        )
        if then.next is Next.WAIT_FOR_PERSON:  # a verdict's wait is the timer's (see run)
            state.waiting_for = report.waiting_for or f"{summary.ending}: {summary.reason}"
        return then.next

    def _may_go(self, state: RunState) -> bool:
        return state.stopping or (not state.paused and state.waiting_for is None)

    async def _release(self, forget: bool = False) -> None:
        """Give the worker its slot back while the run waits (best effort: a
        lost worker has nothing to give back); with `forget` (the run ended),
        the worker that last held it also removes its checkout."""
        state = self.state
        assert state is not None
        placement = state.placement or (state.kept_on if forget else None)
        if placement is None:
            return
        state.placement, state.kept_on = None, None if forget else placement
        with contextlib.suppress(ActivityError):
            await workflow.execute_activity(
                "release",
                args=[workflow.info().workflow_id, forget],
                task_queue=placement.queue,
                # An ended run's checkout is removed by this call alone (a sweep
                # takes only old ones, at a worker's start): a busy worker gets
                # longer to take it than a wait's release, which the next
                # placement makes good anyway.
                schedule_to_start_timeout=FORGET_WAIT if forget else RELEASE_WAIT,
                start_to_close_timeout=FORGET_WAIT if forget else RELEASE_WAIT,
                retry_policy=RetryPolicy(maximum_attempts=1),
            )

    async def _end(self, status: FleetStatus) -> str:
        state = self.state
        assert state is not None
        await self._release(forget=not state.settings.keep_checkout)
        self._show(status)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return status

    def _show(self, status: FleetStatus) -> None:
        state = self.state
        assert state is not None
        self.status = status
        workflow.upsert_memo(
            {
                "status": status_of(state, status),
                "history": history_rows(state),
                "approval": approval_memo(state),
            }
        )

    # --- what a person says: signals, checked by the client as the inbox checks

    @workflow.signal
    def human(self, kind: str, document: dict[str, Any], key: str = "") -> None:
        """A person's input; `key` (when given) names it, and a second signal of
        the same key is dropped."""
        state = self.state
        if state is None or (key and key in state.heard):
            return
        if key:
            state.heard = [*state.heard, key][-MAX_HEARD:]
        if kind == Control.PAUSE:  # the controls a host applies (routing.HOST_CONTROLS)
            state.paused = True
        elif kind == Control.RESUME:
            state.paused, state.waiting_for = False, None
        elif kind == Control.STOP:
            state.stopping = True
        else:
            state.pending = [*state.pending, HumanSignal(state.next_seq, kind, document)]
            state.next_seq += 1
            state.waiting_for = None  # a person wrote: the run goes on
        if self.status in (
            FleetStatus.WAITING,
            FleetStatus.PAUSED,
            FleetStatus.PLACING,
            FleetStatus.RUNNING,
        ):
            self._show(self.status)

    @workflow.query
    def pending(self) -> list[HumanSignal]:
        return list(self.state.pending) if self.state else []

    @workflow.query
    def describe(self) -> dict[str, Any]:
        state = self.state
        if state is None:
            return {}
        return {
            "status": status_of(state, self.status),
            "history": history_rows(state),
            "approval": approval_memo(state),
        }
