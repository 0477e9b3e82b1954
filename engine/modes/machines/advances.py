"""Running a machine's code under a lease: its advances and its compensation.

Retry is ``transactional`` (seed 000): an advance makes only declared database writes,
so it runs inside the PostgreSQL transaction that records the state it returns, fenced
by the work's lease (``leased_commits.commit`` with ``within``). There is no attempt
bracket and no unknown outcome: the writes and the new state commit together or not at
all, a stale owner's writes roll back with its transition, and a lost COMMIT answer is
settled like every other commit. Each attempt:

1. checks the work is still wanted (``gate``): the state it was made for, the attempt
   that is next, not before its retry is due or its timer fired (the timer's
   ``timer_fired`` is recorded with the attempt); a paused execution parks the work;
   an execution migrated to another version since the claim releases it, to the
   workers of that version (the migration moved the work's target there);
2. re-checks, in that transaction, that whoever submitted the execution still stands
   (``engine.store.principals``: still in the team, with a role that covers the scope
   of the submit), or ends it dead (``dead-authorization``); decodes the start data and
   the current state for the machine's code, and runs the advance with a
   ``MachineCall`` for at most ``ADVANCE_TIMEOUT``, as the database role its grants
   name (``grants``: ``SET LOCAL ROLE`` before the code, ``RESET ROLE`` after it, so the
   engine writes the transition as the worker's own login);
3. checks the returned state (a variant, along an allowed edge, within
   ``max_transitions``) and records it (``state_entered``); ``decide`` adds what follows.

An advance that raises or runs out of time rolls its writes back and records
``advance_failed``, with the next attempt due after a doubling backoff; the last one
ends the execution dead. What no retry can mend (an unreadable state, an illegal edge,
transitions used up, a statement the grants refuse: ``dead-grant-denied``) ends it
dead at once, with its writes rolled back. Code that returns after one of its
statements failed (it caught the error) cannot commit its transaction: that attempt
failed too (``advance-statement-failed``).

A role that does not exist or that the worker's login may not act as is no fault of the
execution: its work becomes a dead letter (``grant-role-missing``,
``grant-role-refused``) that an operator retries once the roles are provisioned
(``wayline machine roles``).

A cancellation fences an advance in flight (its transition no longer fits the moved
sequence, so it rolls back) and runs the declared compensation the same way; the
execution is cancelled when the compensation commits. A failed compensation is tried
again later, without history, and after ``max_attempts`` claims it becomes a dead letter
for an operator.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from datetime import timedelta

import psycopg
from psycopg.pq import TransactionStatus

from engine.model.errors import EventInvalid, ReplayRejected
from engine.model.events import EventKind, json_data
from engine.model.instance import InstanceStatus
from engine.model.limits import (
    ADVANCE_BACKOFF_FIRST,
    ADVANCE_BACKOFF_MAX,
    ADVANCE_TIMEOUT,
    MAX_COMPENSATION_TEXT_BYTES,
)
from engine.model.transitions import Draft
from engine.modes.machines import calls, grants
from engine.modes.machines.decide import (
    DEAD_AUTHORIZATION,
    DEAD_CORRUPT_STATE,
    DEAD_GRANT_DENIED,
    DEAD_ILLEGAL_TRANSITION,
    DEAD_TRANSITIONS_EXHAUSTED,
    dead,
)
from engine.modes.machines.declaration import Machine
from engine.modes.machines.fold import manifest_of, progress_of
from engine.store import leases, roles
from engine.store.principals import Standing, standing_on
from engine.worker.leased_commits import (
    Context,
    LeaseHolder,
    NotDue,
    Obsolete,
    Park,
    commit,
    wait_until,
)

K = EventKind
S = InstanceStatus
log = logging.getLogger("wayline.machines")
ADVANCE_RAISED = "advance-raised"
ADVANCE_TIMED_OUT = "advance-timed-out"
ADVANCE_STATEMENT_FAILED = "advance-statement-failed"
COMPENSATION_EXHAUSTED = "compensation-exhausted"


@dataclass(frozen=True)
class Order:
    """What an advance's work asks for: ``attempt`` of the state entered by transition
    ``transitions``, or (``compensate``) the compensation after a cancellation."""

    attempt: int
    transitions: int
    compensate: bool


def order_of(payload: str | None) -> Order | None:
    """The order an advance's work payload holds; None when it holds none."""
    try:
        values = json.loads(payload or "")
        return Order(int(values["attempt"]), int(values["transitions"]), bool(values["compensate"]))
    except (ValueError, KeyError, TypeError):
        return None


class AttemptFailed(Exception):
    """The attempt failed (``code``): its writes were rolled back."""

    def __init__(self, code: str, final: bool = False) -> None:
        super().__init__(code)
        self.code = code
        self.final = final
        """No retry can mend it: the execution ends dead."""


async def process_advance(ctx: Context, current: LeaseHolder) -> None:
    """Run the advance (or compensation) that ``current``'s work names."""
    lease = current.lease
    order = order_of(lease.payload)
    flow = ctx.activities.machine_for(lease.target)
    if order is None or flow is None:
        code = "invalid-advance-dispatch" if order is None else "advance-code-missing"
        await ctx.dead_letter(lease, code)
        return
    attempt = _Attempt(lease, flow, order)
    try:
        await commit(ctx, lease, attempt.gate, within=attempt.run)
    except roles.RoleUnavailable as unavailable:
        log.error("%s cannot run: %s", lease.work_id, unavailable)
        await ctx.dead_letter(lease, unavailable.code)
    except AttemptFailed as failure:
        if order.compensate:
            await _compensate_later(ctx, lease, flow, failure)
        else:
            await commit(ctx, lease, attempt.record(failure))


@dataclass(frozen=True)
class _Attempt:
    lease: leases.Lease
    flow: Machine
    order: Order

    def gate(self, draft: Draft) -> None:
        """Raise Obsolete, Park or NotDue unless the attempt may run now (see the
        module); record the timer that fired for it."""
        state, order = draft.state, self.order
        assert state is not None
        if state.definition != self.flow.definition.ref:  # migrated since the claim
            raise NotDue(draft.now)
        now = progress_of(state)
        if state.status.terminal or now.transitions != order.transitions:
            raise Obsolete
        if order.compensate:
            if state.status is not S.CANCELLING:
                raise Obsolete
            return
        if state.status is S.PAUSED:
            raise Park
        if state.status is not S.RUNNING or now.attempts + 1 != order.attempt:
            raise Obsolete
        if now.retry_at is not None:
            wait_until(draft, now.retry_at, self.lease.claimed_at)
        if manifest_of(state).timer(now.state) is not None and now.timer_fired_at is None:
            if now.timer_due_at is None:
                raise Obsolete
            wait_until(draft, now.timer_due_at, self.lease.claimed_at)
            draft.add(K.TIMER_FIRED, step=now.state)

    async def run(self, draft: Draft, conn: psycopg.AsyncConnection) -> None:
        """Run the code in the commit's transaction and record what it returned."""
        state = draft.state
        assert state is not None
        now = progress_of(state)
        try:
            start = calls.start_of(state)
            current = calls.decode(self.flow, state)
        except calls.StateUnreadable as exc:
            raise AttemptFailed(DEAD_CORRUPT_STATE, final=True) from exc
        standing = await standing_on(conn, start.owner, start.team, start.scope)
        if standing is not Standing.STANDS:
            raise AttemptFailed(DEAD_AUTHORIZATION, final=True)
        attempt = self.lease.attempt if self.order.compensate else self.order.attempt
        call = calls.MachineCall(
            state.instance_id, start.parent, start.input, current, attempt, conn
        )
        result = await self._call(call, grants.role_of(manifest_of(state)))
        if self.order.compensate:
            text = result if isinstance(result, str) else ""
            text = text.encode()[:MAX_COMPENSATION_TEXT_BYTES].decode(errors="ignore")
            draft.add(
                K.COMPENSATION_SUCCEEDED, step=now.state, attempt=attempt, data=json_data(text)
            )
        else:
            self._enter(draft, result)

    async def _call(self, call: calls.MachineCall, role: str) -> object:
        """The code's answer, run as ``role`` (see the module)."""
        flow = self.flow
        code = flow.compensation_function if self.order.compensate else flow.advance_function
        assert code is not None  # registration refuses a machine without it
        conn = call.connection
        await roles.act_as(conn, role)
        try:
            async with asyncio.timeout(ADVANCE_TIMEOUT.total_seconds()):
                result = await code(call)
        except (calls.GrantDenied, psycopg.errors.InsufficientPrivilege) as exc:
            log.warning("%s of %s was refused as %s", code.__name__, call.execution_id, role)
            raise AttemptFailed(DEAD_GRANT_DENIED, final=True) from exc
        except TimeoutError as exc:
            raise AttemptFailed(ADVANCE_TIMED_OUT) from exc
        except Exception as exc:
            log.warning("%s of %s raised", code.__name__, call.execution_id, exc_info=True)
            raise AttemptFailed(ADVANCE_RAISED) from exc
        if conn.info.transaction_status is TransactionStatus.INERROR:
            raise AttemptFailed(ADVANCE_STATEMENT_FAILED)
        await roles.act_as_self(conn)
        return result

    def _enter(self, draft: Draft, result: object) -> None:
        """Record the state the advance returned, or end dead when it may not be."""
        assert draft.state is not None
        manifest, now = manifest_of(draft.state), progress_of(draft.state)
        try:
            name, fields = calls.encode(self.flow, result)
        except calls.StateUnreadable as exc:
            raise AttemptFailed(DEAD_CORRUPT_STATE, final=True) from exc
        if name not in (targets := manifest.targets(now.state)):
            # The history keeps only the code: say here which edge the code took.
            log.warning(
                "advance of %s from %s returned %s, an edge the manifest does not allow "
                "(%s goes to %s)",
                draft.instance_id,
                now.state,
                name,
                now.state,
                ", ".join(sorted(targets)),
            )
            raise AttemptFailed(DEAD_ILLEGAL_TRANSITION, final=True)
        if now.transitions >= manifest.max_transitions:
            raise AttemptFailed(DEAD_TRANSITIONS_EXHAUSTED, final=True)
        data = json_data(fields) if fields else None
        try:
            draft.add(K.STATE_ENTERED, step=name, attempt=self.order.attempt, data=data)
        except (ReplayRejected, EventInvalid, ValueError) as exc:  # of the wrong type or size
            raise AttemptFailed(DEAD_CORRUPT_STATE, final=True) from exc

    def record(self, failure: AttemptFailed):
        """A build that records ``failure`` of this attempt (see the module)."""

        def build(draft: Draft) -> None:
            self.gate(draft)
            assert draft.state is not None
            if failure.final:
                dead(draft, failure.code)
                return
            now, attempt = progress_of(draft.state), self.order.attempt
            last = attempt >= manifest_of(draft.state).max_attempts
            due = None if last else draft.now + backoff(attempt)
            draft.add(
                K.ADVANCE_FAILED, step=now.state, attempt=attempt, code=failure.code, due_at=due
            )

        return build


def backoff(attempt: int) -> timedelta:
    """How long after failed ``attempt`` the next one is due."""
    return min(ADVANCE_BACKOFF_FIRST * 2 ** (attempt - 1), ADVANCE_BACKOFF_MAX)


async def _compensate_later(
    ctx: Context, lease: leases.Lease, flow: Machine, failure: AttemptFailed
) -> None:
    """A failed compensation runs again after a backoff; after ``max_attempts`` claims
    its work is a dead letter, for an operator to retry or discard."""
    if failure.final or lease.attempt >= flow.definition.manifest.max_attempts:
        await ctx.dead_letter(lease, COMPENSATION_EXHAUSTED)
        return
    await leases.retry_at(ctx.store, lease, ctx.store.now() + backoff(lease.attempt), failure.code)
