"""The harness's own view of leases and fencing, independent of the engine's checks.

Two sources, both in the drill schema:

- ``drill_work_changes``: a trigger logs every change of a work row's state, owner,
  token or expiry, with the database time; a row inserted already leased (eager
  dispatch leases the next activity as its transition writes it) is logged as a claim
  of a new row (state 1, token 0). The checker reads claims, takeovers,
  token order and "completed work changed again" (resurrection) from it.
- ``drill_fenced_writes``: inside a drill worker, every lease-holder write (check,
  complete, renew, retry, dead letter, and the fenced transitions a group commit sends
  in one message) is seen by the store's ``lease_writes`` hook (``FencingOracle``). Before
  the engine's statement runs, the oracle reads the row itself and decides whether the
  writer still holds the lease (owner, token, unexpired, before the deadline, by the
  same clock the statement uses; a write that takes an offered lease, whether the work
  was never leased). If the engine's statement then succeeds, a row is
  inserted *in the same transaction*, so it is durable exactly when the write is (a
  write the engine sends alone in autocommit is wrapped in a transaction of the
  oracle's for that, rolled back when the write found no lease: the engine sees its
  COMMIT's failure as the statement's, and a write that wrote nothing sends none). A
  durable row with ``held = false`` is a stale-token write the engine accepted; the
  invariant is that there are none. Attempts are also reported to the observation
  file, so rejected stale writes can be counted too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from engine.store.rows import WorkState
from engine.store.seams import LeaseWrite, LeaseWrites, Row
from verification import observations

AUDIT_TABLES = f"""
CREATE TABLE IF NOT EXISTS drill_work_changes (
    change_id   bigserial PRIMARY KEY,
    work_id     text NOT NULL,
    old_state   smallint NOT NULL,
    new_state   smallint NOT NULL,
    old_token   bigint NOT NULL,
    new_token   bigint NOT NULL,
    old_owner   text NOT NULL,
    new_owner   text NOT NULL,
    old_expires timestamptz,
    new_expires timestamptz,
    old_available timestamptz NOT NULL,
    old_deadline timestamptz,
    at          timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE IF NOT EXISTS drill_fenced_writes (
    write_id  bigserial PRIMARY KEY,
    work_id   text NOT NULL,
    owner     text NOT NULL,
    token     bigint NOT NULL,
    statement text NOT NULL,
    held      boolean NOT NULL,
    pid       integer NOT NULL,
    at        timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE OR REPLACE FUNCTION drill_log_work_change() RETURNS trigger AS $$
BEGIN
    INSERT INTO drill_work_changes (work_id, old_state, new_state, old_token, new_token,
                                    old_owner, new_owner, old_expires, new_expires,
                                    old_available, old_deadline)
    VALUES (OLD.work_id, OLD.state, NEW.state, OLD.lease_token, NEW.lease_token,
            OLD.lease_owner, NEW.lease_owner, OLD.lease_expires_at, NEW.lease_expires_at,
            OLD.available_at, OLD.deadline);
    RETURN NEW;
END
$$ LANGUAGE plpgsql;
CREATE OR REPLACE FUNCTION drill_log_leased_insert() RETURNS trigger AS $$
BEGIN
    INSERT INTO drill_work_changes (work_id, old_state, new_state, old_token, new_token,
                                    old_owner, new_owner, old_expires, new_expires,
                                    old_available, old_deadline)
    VALUES (NEW.work_id, 1, NEW.state, 0, NEW.lease_token, '', NEW.lease_owner, NULL,
            NEW.lease_expires_at, NEW.available_at, NEW.deadline);
    RETURN NEW;
END
$$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS drill_leased_inserts ON work;
CREATE TRIGGER drill_leased_inserts AFTER INSERT ON work FOR EACH ROW
    WHEN (NEW.state <> {WorkState.AVAILABLE}) EXECUTE FUNCTION drill_log_leased_insert();
DROP TRIGGER IF EXISTS drill_work_changes ON work;
CREATE TRIGGER drill_work_changes AFTER UPDATE ON work FOR EACH ROW
    WHEN (ROW(OLD.state, OLD.lease_token, OLD.lease_owner, OLD.lease_expires_at)
          IS DISTINCT FROM ROW(NEW.state, NEW.lease_token, NEW.lease_owner, NEW.lease_expires_at))
    EXECUTE FUNCTION drill_log_work_change();
"""

HOLDS = f"""
SELECT w.state = {WorkState.LEASED} AND w.lease_owner = %(owner)s AND w.lease_token = %(token)s
       AND w.lease_expires_at > COALESCE(%(now)s::timestamptz, statement_timestamp())
       AND w.deadline > COALESCE(%(now)s::timestamptz, statement_timestamp())
FROM work w WHERE w.instance_id = %(work_instance)s AND w.work_id = %(work_id)s
FOR UPDATE
"""
TAKES = f"""
SELECT w.state = {WorkState.AVAILABLE} AND w.lease_token = 0 AND %(token)s::bigint = 1
       AND w.deadline > COALESCE(%(now)s::timestamptz, statement_timestamp())
FROM work w WHERE w.instance_id = %(work_instance)s AND w.work_id = %(work_id)s
FOR UPDATE
"""
"""``HOLDS`` for a write that takes an offered lease: the work was never leased and its
deadline has not passed, and the writer names the token taking it gives it (1). When the
work falls due is the offer's to judge (``engine.store.statements.leases.FRESH``)."""
RECORD_WRITE = """
INSERT INTO drill_fenced_writes (work_id, owner, token, statement, held, pid)
VALUES (%(work_id)s, %(owner)s, %(token)s, %(statement)s, %(held)s, %(pid)s)
"""


WRAPPED_POLL_SECONDS = 0.01
_open_wrapped = [0]
"""How many of the oracle's own transactions (around lone writes) are open here."""


@contextlib.contextmanager
def wrapped_write() -> Iterator[None]:
    """One of the oracle's own transactions is open while this lasts."""
    _open_wrapped[0] += 1
    try:
        yield
    finally:
        _open_wrapped[0] -= 1


async def until_no_wrapped_write() -> None:
    """Return once none of the oracle's own transactions is open in this process.

    Such a transaction holds its work row locked across round trips that the engine's
    lone write, one statement, does not make: a handler that blocks the event loop (D5)
    while one is open keeps the row locked for the whole block, so no other worker can
    take the lease over, as it could from the engine alone. The check and the caller's
    next synchronous step run with no await between them, so no such transaction can
    open in between."""
    while _open_wrapped[0]:
        await asyncio.sleep(WRAPPED_POLL_SECONDS)


def statement_name(write: LeaseWrite) -> str:
    """A short name for a fenced statement: its first keyword and table, and whether it
    takes an offered lease."""
    words = write.statement.split()
    name = " ".join(words[:2]).lower() if words else "?"
    return f"{name} (taking)" if write.takes else name


class FencingOracle(observations.Observer):
    """Store hooks that audit every lease holder's write (see the module docstring)."""

    async def lease_writes(self, sent: LeaseWrites) -> Sequence[Row | None]:
        conn = sent.conn
        if sent.alone:  # its own transaction: the oracle's rows go in one of the oracle's
            with wrapped_write():
                async with conn.transaction() as transaction:
                    rows = await self._audited(sent)
                    if None in rows:  # nothing written: no COMMIT, whose loss looks unknown
                        raise psycopg.Rollback(transaction)
            return rows
        if conn.autocommit and conn.info.transaction_status is TransactionStatus.IDLE:
            await conn.execute("BEGIN")  # the group's own transaction: the engine commits it
        return await self._audited(sent)

    async def _audited(self, sent: LeaseWrites) -> Sequence[Row | None]:
        conn, writes = sent.conn, sent.writes
        audits = [(statement_name(w), await _holds(conn, w)) for w in writes]
        try:
            rows = await self.inner.lease_writes(sent)
        except Exception:
            for write, (name, held) in zip(writes, audits, strict=True):
                _note(write.params, name, held, accepted=False)
            raise
        for write, row, (name, held) in zip(writes, rows, audits, strict=True):
            if row is None:  # no row: the lease was not held, nothing written
                _note(write.params, name, held, accepted=False)
            else:
                await _record(conn, write.params, name, held)
        return rows


async def _holds(conn: psycopg.AsyncConnection, write: LeaseWrite) -> bool:
    """The oracle's own verdict, read before the engine's statement runs (locking the
    row): the writer holds the lease, or (``LeaseWrite.takes``) may take it."""
    row = await (await conn.execute(TAKES if write.takes else HOLDS, write.params)).fetchone()
    return bool(row and row[0])


async def _record(
    conn: psycopg.AsyncConnection, params: Mapping[str, Any], name: str, held: bool
) -> None:
    """An accepted write, durable exactly when the engine's transaction commits."""
    await conn.execute(
        RECORD_WRITE, {**params, "statement": name, "held": held, "pid": os.getpid()}
    )
    _note(params, name, held, accepted=True)


def _note(params: Mapping[str, Any], name: str, held: bool, accepted: bool) -> None:
    """Observe a lease holder's write with the lease it named (work, token, and the
    epoch a claim not yet durable requires), for a finding to be traced write by write."""
    lease = {key: params.get(key) for key in ("work_id", "token", "epoch")}
    observations.note("fenced", statement=name, held=held, accepted=accepted, **lease)
