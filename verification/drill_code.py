"""The code-first workflow drills run: every step body records its effect by
``ctx.step_id``, scripted by the run's input.

``drill.code`` reserves (a compensated step: cancelling a run undoes it), sleeps a
moment (so timers are reached), waits for the signal ``go``, works once and continues
as new (``ctx.continue_as_new``, carrying what it did under ``carried``): its successor
``drill.code/ID+2`` works the second pass (a loop: in a run that works twice, one step
name, two occurrences, so two step_ids) and finishes, returning the whole chain's result.
So every fault the C drills inject also meets a continuation: the decision that ends a
run and starts its successor in one transaction, and a second generation whose step_ids
name its own run. Every step retries an
unknown outcome with the same key (``on_unknown="retry_same_key"``), so a crash never
leaves a run waiting for an operator and the quiet phase can demand that every run
ends.

Each body marks its entry first (``drill_code_entries``, on a connection of its own,
committed at once, as an external system would see it), with two facts read from
history at that moment: whether an attempt under its step_id is durably started, and
whether that attempt already recorded its outcome (then the body is running *again*
for a recorded step). Then it performs its effect: one row of ``drill_code_effects``,
deliberately not deduplicated, so an effect performed twice under one step_id is seen.
The compensation records its undo the same way (``drill_code_undos``). The checker
(``verification.code_checks``) holds these tables against history.

The input scripts a body by step name, as the flow workload does: ``{"fail":
{"reserve": 1}}`` makes the first try of ``reserve`` fail cleanly before any effect (a
known failure, so the next attempt runs under a new step_id); ``{"slow": {"work":
0.8}}`` makes each ``work`` take 0.8 s (its lease is renewed meanwhile).

A *deployment* names the first step (``first_step``): the workflow function is the same
in every deployment, so its fingerprint is too, but a worker started with
``WAYLINE_DRILL_DEPLOY=divergent`` names it ``hold``, as a deploy that changed a helper
the workflow calls would. Replay against a journal that recorded ``reserve`` must
notice (drill C7).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import psycopg

from engine.model.events import EventKind
from engine.modes.code.context import Context
from engine.modes.code.failures import StepFailure
from verification.effects import LEDGER_DSN_ENV

CODE = "drill.code"
VERSION = "1"
SIGNAL = "go"
WORK_PASSES = 2
ATTEMPTS = 8
BACKOFF = "100ms"
STEP_TIMEOUT = "20s"
COOL = "300ms"
SIGNAL_TIMEOUT = "1h"
DEPLOY_ENV = "WAYLINE_DRILL_DEPLOY"
DIVERGENT = "divergent"
DEPLOYMENT = os.environ.get(DEPLOY_ENV, "")
"""This process's deployment, read once at import as a deployed module would be."""
FIRST_STEP = "reserve"
RENAMED_FIRST_STEP = "hold"
STEPS = (FIRST_STEP, "work", "finish")
CARRIED = "carried"
"""The input key under which a run's successor gets what its first run did."""

CODE_TABLES = """
CREATE TABLE IF NOT EXISTS drill_code_entries (
    entry_id      bigserial PRIMARY KEY,
    step_id       text NOT NULL,
    run_id        text NOT NULL,
    start_durable boolean NOT NULL,
    recorded      boolean NOT NULL,
    pid           integer NOT NULL,
    entered_at    timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE IF NOT EXISTS drill_code_effects (
    effect_id     bigserial PRIMARY KEY,
    step_id       text NOT NULL,
    run_id        text NOT NULL,
    pid           integer NOT NULL,
    performed_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE IF NOT EXISTS drill_code_undos (
    undo_id       bigserial PRIMARY KEY,
    step_id       text NOT NULL,
    run_id        text NOT NULL,
    pid           integer NOT NULL,
    undone_at     timestamptz NOT NULL DEFAULT clock_timestamp()
);
"""
"""Non-unique on purpose: a body entered, or an effect performed or undone, twice must be
seen."""

K = EventKind
STARTED, SUCCEEDED, FAILED = int(K.ATTEMPT_STARTED), int(K.ATTEMPT_SUCCEEDED), int(K.ATTEMPT_FAILED)
ENTER = f"""
INSERT INTO drill_code_entries (step_id, run_id, start_durable, recorded, pid)
SELECT %(step_id)s, %(run)s,
       EXISTS (SELECT 1 FROM history WHERE instance_id = %(run)s AND kind = {STARTED}
                                      AND idempotency_key = %(step_id)s),
       EXISTS (SELECT 1 FROM history s
               JOIN history o ON o.instance_id = s.instance_id AND o.step_name = s.step_name
                             AND o.attempt = s.attempt AND o.kind IN ({SUCCEEDED}, {FAILED})
               WHERE s.instance_id = %(run)s AND s.kind = {STARTED}
                 AND s.idempotency_key = %(step_id)s),
       %(pid)s
"""
EFFECT = """
INSERT INTO drill_code_effects (step_id, run_id, pid) VALUES (%(step_id)s, %(run)s, %(pid)s)
"""
UNDO = """
INSERT INTO drill_code_undos (step_id, run_id, pid) VALUES (%(step_id)s, %(run)s, %(pid)s)
"""


def first_step() -> str:
    """The first step's name in this deployment (see the module)."""
    return RENAMED_FIRST_STEP if DEPLOYMENT == DIVERGENT else FIRST_STEP


async def workflow(ctx: Context, data: dict[str, Any]) -> dict[str, Any]:
    """Reserve, cool down, wait for ``go``, work once and continue as new; the
    successor works the other passes and finishes, and returns what the whole chain did
    (see the module)."""
    if CARRIED not in data:
        ctx.continue_as_new({**data, CARRIED: await _first(ctx, data)})
    carried = data[CARRIED]
    worked = [*carried["work"]]
    while len(worked) < WORK_PASSES:
        worked.append(await _step(ctx, data, "work"))
    return {**carried, "work": worked, "finish": await _step(ctx, data, "finish")}


async def _first(ctx: Context, data: dict[str, Any]) -> dict[str, Any]:
    """The first run's part: reserve, cool down, wait for ``go``, one pass of work."""
    reserved = await ctx.step(
        first_step(),
        lambda: effect(ctx, data, FIRST_STEP),
        retries=ATTEMPTS,
        backoff=BACKOFF,
        timeout=STEP_TIMEOUT,
        compensate=lambda result: undo(ctx, result),
        on_unknown="retry_same_key",
    )
    await ctx.sleep(COOL)
    go = await ctx.wait_signal(SIGNAL, timeout=SIGNAL_TIMEOUT)
    return {"reserved": reserved, "go": go, "work": [await _step(ctx, data, "work")]}


async def _step(ctx: Context, data: dict[str, Any], name: str) -> Any:
    """Step ``name`` (``work`` or ``finish``: every step but the compensated first one),
    its body ``effect``."""
    return await ctx.step(
        name,
        lambda: effect(ctx, data, name),
        retries=ATTEMPTS,
        backoff=BACKOFF,
        timeout=STEP_TIMEOUT,
        on_unknown="retry_same_key",
    )


async def effect(ctx: Context, data: dict[str, Any], name: str) -> dict[str, Any]:
    """A step body: mark the entry, fail if scripted to (before any effect), take the
    scripted time, perform the effect under ``ctx.step_id``."""
    step_id = ctx.step_id
    fields = {"step_id": step_id, "run": ctx.run_id, "pid": os.getpid()}
    async with await psycopg.AsyncConnection.connect(
        os.environ[LEDGER_DSN_ENV], autocommit=True
    ) as conn:
        await conn.execute(ENTER, fields)
        if try_of(step_id) <= int(_script(data, "fail", name) or 0):
            raise StepFailure(f"scripted failure of try {try_of(step_id)} before any effect")
        await asyncio.sleep(float(_script(data, "slow", name) or 0))
        await conn.execute(EFFECT, fields)
    return {"step_id": step_id}


async def undo(ctx: Context, result: Any) -> dict[str, Any]:
    """The first step's compensation: undo its effect, once, under its step_id."""
    fields = {"step_id": ctx.step_id, "run": ctx.run_id, "pid": os.getpid()}
    async with await psycopg.AsyncConnection.connect(
        os.environ[LEDGER_DSN_ENV], autocommit=True
    ) as conn:
        await conn.execute(UNDO, fields)
    return {"undone": result}


def try_of(step_id: str) -> int:
    """The try of ``<run>/<step>#<occurrence>.<try>``: 1 plus the recorded known failures."""
    return int(step_id.rpartition(".")[2])


def _script(data: Any, setting: str, name: str) -> Any:
    """The input's ``setting`` for step ``name`` (None when absent)."""
    settings = data.get(setting, {}) if isinstance(data, dict) else {}
    return settings.get(name) if isinstance(settings, dict) else None
