"""The DECISION work of a code-first run: replay its code, record what it asks next.

A worker whose app declares the run's workflow (``workflow:<name>@<version>``, pinned
by fingerprint) claims the work, resolves the waits that are due (their timeouts), and
replays the code against the journal (``driver.drive``). One transition, fenced by the
lease, records the new commands with their work and the run's ending if it ended
(``commands``); the decision that follows rides with it (``decide``). The first new
step's attempt is started in that same transaction and leased to this worker (eager
dispatch), whose body then runs at once, as any activity's would; when its outcome asks
for the next decision, that is handed on to this worker too, so a run whose worker has
its code goes from step to step without waiting for a claim.

A replay that diverges from the journal (the code changed under the run, or did what
replay cannot reproduce) records nothing: the work becomes a dead letter with the code
``journal-divergence`` (or ``not-deterministic``) and the divergence message as its
``failure_detail``, and the run stays running, parked visibly. Retrying the dead letter
after deploying code that matches replays it again. Code whose fingerprint is not the
run's pin is refused the same way (``workflow-code-differs``), never run, and so is a
decision the engine's rules refuse to record (``decision-refused``, with the rule), and
a continuation whose successor's id another instance holds (``successor-id-taken``).
"""

from __future__ import annotations

import json
import logging
from datetime import datetime

from engine.model.definitions import DefinitionRef
from engine.model.errors import EventInvalid, ReplayRejected, TransitionInvalid, WaylineError
from engine.model.instance import Instance, InstanceStatus
from engine.model.transitions import Draft
from engine.modes.code import commands, continuation, waits
from engine.modes.code.decide import WAKE
from engine.modes.code.declaration import CodeWorkflow
from engine.modes.code.driver import drive
from engine.modes.code.effects import SPAWN_NOT_FOUND, SUCCESSOR_ID_TAKEN
from engine.modes.code.effects import WORKFLOW_CODE_DIFFERS as CODE_DIFFERS
from engine.modes.code.effects import WORKFLOW_CODE_MISSING as CODE_MISSING
from engine.modes.code.fold import entries
from engine.modes.code.journal import Diverged
from engine.store import catalog, leases
from engine.store.catalog import conflict_message
from engine.store.errors import DuplicateTransition, InstanceExists
from engine.worker import processors
from engine.worker.hooks import WorkerHooks
from engine.worker.leased_commits import (
    Context,
    Eager,
    LeaseHolder,
    Obsolete,
    Park,
    commit,
    wait_until,
)

S = InstanceStatus
log = logging.getLogger("wayline.code")
DECISION_REFUSED = "decision-refused"


class _Parked(Exception):
    """The decision cannot be recorded: its work becomes a dead letter."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


async def process_decision(ctx: Context, current: LeaseHolder) -> None:
    """Replay the code of the run ``current``'s work names (see the module), and go on
    with the decisions handed on to this worker after it (eager dispatch)."""
    while await _decide(ctx, current):
        pass


async def _decide(ctx: Context, current: LeaseHolder) -> bool:
    """One decision, and the step it started here; True when the next decision was
    handed on to this worker (``current`` then holds its lease)."""
    lease = current.lease
    flow = ctx.activities.workflow_at(lease.target)
    if flow is None:
        await ctx.dead_letter(lease, CODE_MISSING, f"{lease.target} is not here")
        return False
    spawns: dict[str, DefinitionRef] = {}
    eager = Eager(ctx, current.lease_for)
    while True:
        try:
            with current.completing():
                build = _decision(flow, spawns, lease, ctx.hooks)
                state = await commit(
                    ctx, lease, build, eager=eager, companions=continuation.successor_start
                )
        except commands.SpawnUnresolved as missing:
            try:
                found = await catalog.resolve_for_start(ctx.store, missing.name, None)
            except WaylineError as exc:  # not published, or deprecated: a deploy problem
                log.warning("spawn of %s refused: %s", missing.name, type(exc).__name__)
                detail = f"spawn of {missing.name!r}: no published version can start"
                await ctx.dead_letter(lease, SPAWN_NOT_FOUND, detail)
                return False
            await ctx.registries.holding(found)  # a continuation's successor starts on it
            spawns[missing.name] = found
            continue
        except (InstanceExists, DuplicateTransition):  # raised for its successor's start
            detail = f"{continuation.successor_of(lease.instance_id)} exists already"
            await ctx.dead_letter(lease, SUCCESSOR_ID_TAKEN, detail)
            return False
        except (ReplayRejected, EventInvalid, TransitionInvalid) as refused:
            # what the code asked for cannot be recorded (a bound it ran into): park it
            log.warning("%s parked: %s", lease.instance_id, refused)
            await ctx.dead_letter(lease, DECISION_REFUSED, str(refused))
            return False
        except _Parked as parked:
            log.warning("%s parked: %s", lease.instance_id, parked.detail)
            await ctx.dead_letter(lease, parked.code, parked.detail)
            return False
        break
    if state is not None:
        await ctx.hooks.journal_replayed(flow.function, state)
    if state is None or eager.lease is None:
        return False
    current.lease = eager.lease
    ctx.metrics.count("eager_dispatches")
    if eager.dispatch is None:  # a decision due at once (a wait resolved from the inbox)
        return True
    return await processors.run_attempts(ctx, processors.ACTIVITY, current, state, eager.dispatch)


def _decision(
    flow: CodeWorkflow, spawns: dict[str, DefinitionRef], lease: leases.Lease, hooks: WorkerHooks
):
    """The build of one decision (see the module); ``hooks`` see a divergence."""

    def build(draft: Draft) -> None:
        state = draft.state
        assert state is not None
        if state.status is S.PAUSED:
            raise Park
        if state.status is not S.RUNNING:
            raise Obsolete
        if flow.fingerprint != state.definition.fingerprint:
            pinned = state.definition.fingerprint
            raise _Parked(CODE_DIFFERS, conflict_message(flow.definition, pinned))
        wake = _wake_for(state, lease)
        if wake is not None:  # the decision is for a wait's timeout: act at its time
            wait_until(draft, wake, lease.claimed_at)
        waits.resolve(draft)
        run = draft.state
        assert run is not None
        advance = drive(flow.function, run.value("input"), entries(run), run_id=run.instance_id)
        if isinstance(advance, Diverged):
            advance = hooks.journal_diverged(advance)
        if isinstance(advance, Diverged):
            raise _Parked(advance.code, advance.message)
        commands.record(draft, advance, spawns)
        if not draft.events:
            raise Obsolete

    return build


def _wake_for(state: Instance, lease: leases.Lease) -> datetime | None:
    """When the wait a timeout's DECISION is for times out, while that wait is open;
    None for any other decision. A claim before then (a resumed run re-arms its work at
    once) is released until then (``wait_until``), and a claim a moment after it by the
    store's clock acts at that time, never finding the wait not yet due."""
    try:
        key = json.loads(lease.payload or "{}").get(WAKE, "")
    except (ValueError, AttributeError):
        return None
    wait = state.waits.get(key) if isinstance(key, str) else None
    return None if wait is None or wait.done else wait.due_at
