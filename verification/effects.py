"""The effects ledger: every real side effect a drill activity performs, with its key.

A recorded outcome says what the engine *believes*; the ledger says what the outside
world *saw*. Drill activities call ``record_effect`` instead of charging a card: it
writes one row per handler call into ``drill_effect_calls`` (in the drill's own schema,
over its own direct connection, like an external system would) and applies the effect
at most once per idempotency key (``drill_effects_applied``), the way a payment gateway
deduplicates by key. It also asks whether the attempt's start is already durable in
history, so "the handler ran before its attempt start was committed" is a fact in the
ledger rather than a guess. Every handler marks its entry first, before any of that
(``mark_entry``, ``drill_handler_entries``), so an attempt recorded unknown can be
checked to have had its handler started.

The checker compares these rows with history (see ``verification.invariants``).
"""

from __future__ import annotations

import os

import psycopg

from engine.model.events import EventKind
from engine.worker.activities import ActivityRequest
from engine.worker.hooks import WorkerHooks

LEDGER_DSN_ENV = "WAYLINE_DRILL_LEDGER_DSN"
"""Direct (never proxied) DSN of the drill schema, set for drill worker processes."""
BODY_ENTRIES_ENV = "WAYLINE_DRILL_BODY_ENTRIES"
"""Set for a drill's workers whose code-first step bodies are the team's own code (a
drill plan's): each body entered is marked (``BodyEntries``)."""

LEDGER_TABLES = """
CREATE TABLE IF NOT EXISTS drill_effect_calls (
    call_id         bigserial PRIMARY KEY,
    idempotency_key text NOT NULL,
    target          text NOT NULL,
    instance_id     text NOT NULL,
    step            text NOT NULL,
    attempt         integer NOT NULL,
    compensation    boolean NOT NULL,
    start_durable   boolean NOT NULL,
    applied         boolean NOT NULL,
    seen            boolean NOT NULL,
    pid             integer NOT NULL,
    called_at       timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE IF NOT EXISTS drill_handler_entries (
    entry_id        bigserial PRIMARY KEY,
    idempotency_key text NOT NULL,
    instance_id     text NOT NULL,
    step            text NOT NULL,
    attempt         integer NOT NULL,
    compensation    boolean NOT NULL,
    pid             integer NOT NULL,
    entered_at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE IF NOT EXISTS drill_effects_applied (
    idempotency_key text PRIMARY KEY,
    instance_id     text NOT NULL,
    step            text NOT NULL,
    compensation    boolean NOT NULL
);
"""

START_DURABLE = """
SELECT EXISTS (SELECT 1 FROM history
               WHERE instance_id = %(instance)s AND kind = %(kind)s AND step_name = %(step)s
                 AND attempt = %(attempt)s AND idempotency_key = %(key)s)
"""
APPLY = """
INSERT INTO drill_effects_applied (idempotency_key, instance_id, step, compensation)
VALUES (%(key)s, %(instance)s, %(step)s, %(compensation)s)
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING true
"""
CALL = """
INSERT INTO drill_effect_calls (idempotency_key, target, instance_id, step, attempt,
                                compensation, start_durable, applied, seen, pid)
VALUES (%(key)s, %(target)s, %(instance)s, %(step)s, %(attempt)s, %(compensation)s,
        %(durable)s, %(applied)s, %(seen)s, %(pid)s)
"""


ENTRY = """
INSERT INTO drill_handler_entries (idempotency_key, instance_id, step, attempt, compensation,
                                   pid)
VALUES (%(key)s, %(instance)s, %(step)s, %(attempt)s, %(compensation)s, %(pid)s)
"""


def mark_entry(request: ActivityRequest) -> None:
    """Record that a handler was entered for ``request``'s attempt, before it does
    anything: an attempt recorded unknown must have one (its effect may have happened),
    or the engine called "unknown" a handler that never ran."""
    with psycopg.connect(os.environ[LEDGER_DSN_ENV]) as conn:
        conn.execute(ENTRY, attempt_fields(request))


class BodyEntries(WorkerHooks):
    """A worker that marks every code-first step body it enters in
    ``drill_handler_entries``, as a handler marks its own, committed before the body's
    first line: the team's bodies cannot mark themselves, and an attempt's start would
    count bodies a worker died before entering."""

    async def body_entering(
        self, run_id: str, step: str, step_id: str, attempt: int, compensation: bool
    ) -> None:
        fields = {"key": step_id, "instance": run_id, "step": step, "attempt": attempt}
        fields |= {"compensation": compensation, "pid": os.getpid()}
        dsn = os.environ[LEDGER_DSN_ENV]
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await conn.execute(ENTRY, fields)


def worker_hooks() -> WorkerHooks | None:
    """``BodyEntries`` for a worker that ``BODY_ENTRIES_ENV`` asks to mark bodies."""
    return BodyEntries() if os.environ.get(BODY_ENTRIES_ENV) else None


def attempt_fields(request: ActivityRequest) -> dict[str, object]:
    """Who ran which attempt: the fields every record of a handler's run carries."""
    return {
        "key": request.idempotency_key,
        "target": request.target,
        "instance": request.instance_id,
        "step": request.step,
        "attempt": request.attempt,
        "compensation": request.compensation,
        "pid": os.getpid(),
    }


def record_effect(request: ActivityRequest, idempotent: bool = True, seen: bool = True) -> bool:
    """Perform the drill's external effect for ``request``; True when newly applied.

    One short transaction on a fresh connection: a crash of the caller right after
    this returns leaves the effect recorded, as with a real external call. A system
    that is not ``idempotent`` applies the effect on every call, whatever its key
    (a drill plan's stub can be one, to show what a retry with the same key repeats).
    A team's own handler's call is not ``seen``: its effect is made in the team's
    system, so the ledger's "applied" is only the drill's stand-in for it (kept for the
    invariants), never a count to report.
    """
    kinds = (EventKind.ATTEMPT_STARTED, EventKind.COMPENSATION_ATTEMPT_STARTED)
    started = kinds[request.compensation]
    params = {**attempt_fields(request), "kind": int(started), "seen": seen}
    with psycopg.connect(os.environ[LEDGER_DSN_ENV]) as conn:
        params["durable"] = conn.execute(START_DURABLE, params).fetchone()[0]
        params["applied"] = conn.execute(APPLY, params).fetchone() is not None or not idempotent
        conn.execute(CALL, params)
    return params["applied"]
