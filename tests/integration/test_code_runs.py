"""Code-first runs against a real PostgreSQL on a manual clock: the example order saga
from start to settlement through every verb (step, race, spawn, all, sleep, the child's
wait_signal), with the journal, the step ids and the effects checked on the way."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine.api.client import Client
from engine.api.queries import Queries
from engine.decide.operator_actions import Action
from engine.model.canonical import format_instant
from engine.model.description import describe_instance
from engine.model.errors import CommandConflict, DefinitionNotFound, InputRefused
from engine.model.events import EventKind
from engine.model.frozen import evolve
from engine.model.instance import AttemptStatus, ChildStatus, InstanceStatus, instance_to_json
from engine.modes.code.decide import CODE_RUNS_NEXT
from engine.modes.code.journal import EntryState, Verb
from engine.modes.code.runs import RUN_ID_RULE
from engine.store import catalog
from engine.store.clock import ManualClock
from engine.store.store import Store
from engine.worker.activities import ActivityRegistry
from engine.worker.leased_commits import Context
from examples import order_saga
from examples.orders import EFFECTS_ENV
from studio.code import journal_view
from tests.fixtures.journal import renamed
from tests.integration.code_runs import (
    effects,
    history,
    journal,
    keys,
    kinds,
    settle,
)

T0 = datetime(2031, 6, 7, 8, 0, tzinfo=UTC)
K = EventKind
S = InstanceStatus
RUN = "order-saga/o-42"
CHILD = "order-saga/o-42/spawn.1"


@pytest.fixture
def effects_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "effects.jsonl"
    monkeypatch.setenv(EFFECTS_ENV, str(path))
    return path


@pytest.fixture
def code_app() -> ActivityRegistry:
    return order_saga.app


async def started(client: Client, ctx: Context, input: dict | None = None) -> None:
    run, created = await client.start_run("order-saga", input or ORDER, id="o-42")
    assert (run, created) == (RUN, True)
    await settle(ctx)


ORDER = {"sku": "mug", "amount": 1200}


async def test_the_order_saga_settles_through_every_verb(
    client: Client, ctx: Context, store: Store, clock: ManualClock, effects_file: Path
) -> None:
    await started(client, ctx)
    state = await client.inspect(RUN)
    assert keys(state) == ["reserve.1", "race.1"]
    assert state.activities["reserve.1"].idempotency_key == "order-saga/o-42/reserve#1.1"

    await client.signal(RUN, "paid", "pay-1", {"by": "ada"})
    await settle(ctx)
    state = await client.inspect(RUN)
    assert keys(state) == ["reserve.1", "race.1", "charge.1", "spawn.1", "all.1"]
    race = (await journal(client, RUN))[1]
    assert race.value == [{"by": "ada"}, "paid"]
    assert await client.awaiting(state) == "waiting for all.1"
    charging = evolve(state.activities["charge.1"], status=AttemptStatus.RUNNING)
    in_flight = evolve(state, activities={**state.activities, "charge.1": charging})
    assert await client.awaiting(in_flight) == "waiting for step charge.1, all.1"
    child = await client.inspect(CHILD)
    assert keys(child) == ["label.1", "await.picked-up.1"]

    await client.signal(CHILD, "picked-up", "pick-1")
    await client.signal(RUN, "received", "recv-1", "thanks")
    await settle(ctx)
    assert (await client.inspect(CHILD)).status is S.COMPLETED
    state = await client.inspect(RUN)
    assert keys(state)[-1] == "sleep.1"
    assert [e.state for e in await journal(client, RUN)][-1] is EntryState.OPEN
    due = format_instant(state.timers["sleep.1"].due_at)
    assert await client.awaiting(state) == f"waiting for sleep.1 until {due}"  # inspect's now:

    clock.advance(timedelta(hours=1))
    await settle(ctx)
    state = await client.inspect(RUN)
    assert state.status is S.COMPLETED, state.status
    assert state.value("result") == {"outcome": "settled", "payment": "order-saga/o-42/charge#1.1"}
    done = [(e["effect"], e["key"]) for e in effects(effects_file)]
    assert done == [
        ("reserve", "order-saga/o-42/reserve#1.1"),
        ("charge", "order-saga/o-42/charge#1.1"),
        ("label", "order-saga/o-42/spawn.1/label#1.1"),
        ("settle", "order-saga/o-42/settle#1.1"),
    ]
    all_entry = next(e for e in await journal(client, RUN) if e.verb is Verb.ALL)
    assert all_entry.value[1] == "thanks"
    shown = json.loads(json.dumps(instance_to_json(state)))  # what inspect --json prints
    assert [r["key"] for r in shown["journal"]][-2:] == ["sleep.1", "settle.1"]
    assert "journal 6 step settle.1" in describe_instance(state)


async def test_a_retried_start_joins_the_run(client: Client, ctx: Context) -> None:
    """Also once the run's version is deprecated (it was refused as deprecated: the
    version was read before the run), while a new run of it is refused."""
    await started(client, ctx)
    assert await client.start_run("order-saga", {"other": 1}, id="o-42") == (RUN, False)
    status = await client.status(RUN)
    assert set(status) == {"kind", "seq", "at"} and status["kind"] == "wait_started"
    version = (await client.inspect(RUN)).definition.version
    await catalog.deprecate(client.store, "order-saga", version)
    assert await client.start_run("order-saga", ORDER, id="o-42", version=version) == (RUN, False)
    assert await client.start_run("order-saga", ORDER, id="o-42") == (RUN, False)
    with pytest.raises(DefinitionNotFound):
        await client.start_run("order-saga", ORDER, id="o-43")


@pytest.mark.parametrize("bad", ["", "a/b"])
async def test_a_run_id_with_a_slash_or_empty_is_refused(client: Client, bad: str) -> None:
    with pytest.raises(InputRefused, match=re.escape(RUN_ID_RULE)):
        await client.start_run("order-saga", ORDER, id=bad)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("o-42", r"^a run of code workflow order-saga has the instance id order-saga/ID: "),
        ("other-saga/o-42", "^a run of code workflow order-saga has the instance id"),
        ("order-saga/a/b", f"^{re.escape(RUN_ID_RULE)}$"),
        ("order-saga/", f"^{re.escape(RUN_ID_RULE)}$"),
        ("order-saga/a b", "^the run id order-saga/a b must be 1 to 200 characters"),
        ("order-saga/" + "x" * 200, "^the run id order-saga/x+ must be 1 to 200 characters"),
    ],
)
async def test_a_start_by_instance_id_holds_a_code_run_to_the_run_id_rule(
    client: Client, store: Store, bad: str, message: str
) -> None:
    """``Client.start`` took any id for a code workflow (``a/b`` as a run of no name),
    where ``start_run`` refuses one that is not ``<name>/<id>`` with a run id."""
    with pytest.raises(InputRefused, match=message):
        await client.start("order-saga", bad, ORDER)
    assert (await Queries(store).instances()).rows == (), "nothing was started"
    state = await client.start("order-saga", RUN, ORDER)
    assert state.instance_id == RUN
    assert await client.start_run("order-saga", ORDER, id="o-42") == (RUN, False)


async def test_duplicate_and_extra_signals_are_set_aside(
    client: Client, ctx: Context, store: Store
) -> None:
    """Seed gotcha: a duplicate signal is safe; an unconsumed extra is set aside."""
    await started(client, ctx)
    await client.signal(RUN, "paid", "pay-1", {"by": "ada"})
    await client.signal(RUN, "paid", "pay-1", {"by": "ada"})  # the same click again
    await client.signal(RUN, "paid", "pay-2", {"by": "bob"})  # a second click
    await settle(ctx)
    state = await client.inspect(RUN)
    assert [(s.signal_id, s.consumed_by) for s in state.inbox] == [
        ("pay-1", "race.1"),
        ("pay-2", ""),
    ]
    assert len(await kinds(store, RUN, K.SIGNAL_RECEIVED)) == 2
    assert state.status is S.RUNNING
    received, resolved = (await kinds(store, RUN, K.SIGNAL_RECEIVED, K.WAIT_RESOLVED))[:2]
    assert resolved.sequence == received.sequence + 1, "the client resolved the race itself"


async def test_a_run_no_worker_has_decided_says_so_and_its_early_signal_waits(
    client: Client, ctx: Context
) -> None:
    """``wayline inspect`` of a run whose code has not run yet said a bare "waiting",
    and a signal sent before its wait opened was "set aside" although the wait would
    take it; only a run that ended has set a signal aside."""
    await client.start_run("order-saga", ORDER, id="o-42")
    await client.signal(RUN, "paid", "pay-1", {"by": "ada"})
    early = await client.inspect(RUN)
    assert await client.awaiting(early) == CODE_RUNS_NEXT.format(target="workflow:order-saga@1")
    assert "  inbox paid pay-1: not taken yet" in describe_instance(early).splitlines()
    await settle(ctx)
    taken = await client.inspect(RUN)
    assert "  inbox paid pay-1: taken by race.1" in describe_instance(taken).splitlines()


async def test_a_signal_a_person_sends_is_audited_and_joins_the_inbox(
    client: Client, ctx: Context, store: Store
) -> None:
    """The studio's send form: a ``signal`` command, whose id is the signal's, resolves
    the wait as a plain signal does, and the audit trail names who sent it and why."""
    await started(client, ctx)
    await client.command(
        RUN, Action.SIGNAL, "ada", "paid at the till", "till-1", step="paid", payload={"by": "ada"}
    )
    await settle(ctx)
    state = await client.inspect(RUN)
    assert [(s.signal_id, s.consumed_by) for s in state.inbox] == [("till-1", "race.1")]
    assert [(a.action, a.actor, a.reason) for a in state.audit] == [
        ("signal", "ada", "paid at the till")
    ]
    assert keys(state)[:3] == ["reserve.1", "race.1", "charge.1"]


async def test_a_paused_run_decides_nothing_until_resumed(
    client: Client, ctx: Context, store: Store
) -> None:
    await started(client, ctx)
    await client.command(RUN, Action.PAUSE, "ops", "hold on")
    await client.signal(RUN, "paid", "pay-1", {"by": "ada"})  # buffered while paused
    await settle(ctx)
    assert keys(await client.inspect(RUN)) == ["reserve.1", "race.1"]
    await client.command(RUN, Action.RESUME, "ops", "go on")
    await settle(ctx)
    state = await client.inspect(RUN)
    assert keys(state)[:3] == ["reserve.1", "race.1", "charge.1"]
    assert [a.action for a in state.audit] == ["pause", "resume"]


async def test_approve_of_a_code_run_step_is_refused_and_records_nothing(
    client: Client, ctx: Context, store: Store
) -> None:
    """A code-first run has no approval steps: an approve of one of its steps is refused
    as for a step list's activity, rather than recorded as a signal named after it."""
    await started(client, ctx)
    before = await history(store, RUN)
    with pytest.raises(InputRefused, match=r"step 'reserve\.1' is an activity step: approve only"):
        await client.command(RUN, Action.APPROVE, "ops", "looks fine", step="reserve.1")
    assert await history(store, RUN) == before


async def test_replay_check_sorts_running_runs_into_compatible_and_divergent(
    client: Client, ctx: Context, store: Store
) -> None:
    """Versions: the journals of running runs replay against new code; a run the new
    code departs from is divergent, with where (and nothing is recorded)."""
    await started(client, ctx)  # o-42 will charge
    await client.start_run("order-saga", ORDER, id="o-6")  # o-6 stays at the race
    await client.signal(RUN, "paid", "pay-1", {"by": "ada"})
    await settle(ctx)
    before = await history(store, RUN)
    (flow,) = renamed.app.workflows
    report = await client.check_compatibility(flow.definition, flow)
    assert report.summary() == [
        "order-saga@2: 2 running checked: 1 compatible, 1 incompatible",
        "incompatible order-saga/o-42 (v1): journal divergence: expected step 'charge' at "
        "position 2 (event 8), code reached step 'capture'",
    ]
    assert await history(store, RUN) == before


@pytest.mark.parametrize(
    ("name", "payload"), [("paid", {"by": "eve"}), ("cancelled", {"by": "ada"})]
)
async def test_a_person_s_signal_sent_again_with_another_payload_or_name_is_refused(
    client: Client, ctx: Context, store: Store, name: str, payload: dict
) -> None:
    """The studio's send form reused with its signal id for a corrected signal: the
    inbox keeps the first, so the second is a conflict, never reported as delivered
    while it is lost; the exact repeat still acts once."""
    await started(client, ctx)
    sent = ("ops", "paid at the till", "till-1")
    await client.command(RUN, Action.SIGNAL, *sent, step="paid", payload={"by": "ada"})
    before = await history(store, RUN)
    with pytest.raises(CommandConflict, match="signal till-1 carried another name or payload"):
        await client.command(RUN, Action.SIGNAL, *sent, step=name, payload=payload)
    await client.command(RUN, Action.SIGNAL, *sent, step="paid", payload={"by": "ada"})
    assert await history(store, RUN) == before


async def test_inspect_of_a_run_cancelled_at_its_race_says_the_wait_is_cancelled(
    client: Client, ctx: Context
) -> None:
    """``wayline inspect`` of a run cancelled while it raced: the race will never
    resume, so its line says cancelled and why, as a timer's does, never still open."""
    await started(client, ctx)
    await client.command(RUN, Action.CANCEL, "ops", "order void")
    await settle(ctx)
    state = await client.inspect(RUN)
    assert state.status is S.CANCELLED, state.status
    lines = describe_instance(state).splitlines()
    assert "  wait race.1: cancelled (the instance was cancelled) on paid, cancelled" in lines


async def test_an_ended_run_no_longer_awaits_the_child_it_spawned(
    client: Client, ctx: Context
) -> None:
    """A parent hears of its child's end only while it has not ended: a child still
    active when its parent ended kept reading "active" on the parent's page and in
    ``inspect``, though nothing awaits it any more; it now says so, and why. A child
    its parent's cancel ended (the outcome recorded as the parent unwound) says that."""
    await started(client, ctx)
    await client.signal(RUN, "paid", "pay-1", {"by": "ada"})
    await settle(ctx)
    await client.command(RUN, Action.CANCEL, "ops", "order void")
    await settle(ctx)
    state = await client.inspect(RUN)
    assert state.status is S.CANCELLED, state.status
    recorded = f"  child spawn.1: cancelled with its parent instance {CHILD}"  # as it unwound
    assert recorded in describe_instance(state).splitlines()
    child = evolve(state.children["spawn.1"], status=ChildStatus.ACTIVE)
    ended = evolve(state, status=S.COMPLETED, audit=(), children={"spawn.1": child})
    said = f"  child spawn.1: no longer awaited (the instance completed) instance {CHILD}"
    assert said in describe_instance(ended).splitlines()
    row = next(r for r in journal_view.view(ended).rows if r.record.key == "spawn.1")
    assert (row.state.state, row.state.note) == (
        "cancelled",
        f"run {CHILD}: no longer awaited (the instance completed)",
    )
