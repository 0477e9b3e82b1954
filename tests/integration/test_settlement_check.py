"""The harness's check of the engine's settlements (invariant A) on a real ledger.

A settlement the engine calls "committed" says its transitions are durable. After a
failover its own COMMIT may be lost while the same transitions were committed again on
the promoted server: the verdict is true of them, though not of the transaction id it
asked about. A "committed" whose transitions are not in the ledger, or are there with
other content (the same attempt started again by another lease), stays a violation.
"""

import psycopg

from verification import invariants
from verification.findings import Findings

NEW_INSTANCE = """
INSERT INTO instances (instance_id, definition_name, definition_version,
                       definition_fingerprint, status, sequence, created_at, updated_at)
VALUES ('i1', 'd', '1', repeat('0', 64), 1, 0, now(), now())
"""
LEDGER_ROW = """
INSERT INTO transitions (transition_id, instance_id, fingerprint, expected_sequence,
                         committed_sequence, xact_id)
VALUES ('i1#1', 'i1', repeat('0', 64), 0, 1, pg_current_xact_id())
"""


async def aborted_xid(aconn: psycopg.AsyncConnection) -> str:
    """The id of a transaction that wrote the ledger row and rolled back."""
    async with aconn.transaction(force_rollback=True):
        await aconn.execute(LEDGER_ROW)
        row = await (await aconn.execute("SELECT pg_current_xact_id()::text")).fetchone()
    return row[0]


WRITTEN = "0" * 64
"""The fingerprint of the settled commit's transition (``LEDGER_ROW``'s)."""


def committed_settlement(fingerprint: str = WRITTEN, **named: object) -> dict:
    """A "committed" settlement of ``LEDGER_ROW``'s transition, as written with
    ``fingerprint``; ``named``: its xid, or the pid of a lone write's session."""
    transition = {"transitions": ["i1#1"], "instances": ["i1"], "fingerprints": [fingerprint]}
    return {**named, **transition, "verdict": "committed"}


async def test_committed_is_true_when_another_transaction_committed_the_transitions(aconn):
    await aconn.execute(NEW_INSTANCE)
    xid = await aborted_xid(aconn)
    await aconn.execute(LEDGER_ROW)  # the same transition, committed by another transaction
    findings = Findings()

    problems = await invariants._settlement(aconn, committed_settlement(xid=xid), findings, 0)

    assert problems == []
    assert findings.stats["settled_committed_by_another"] == 1


async def test_committed_is_a_violation_when_the_ledger_lacks_the_transitions(aconn):
    await aconn.execute(NEW_INSTANCE)
    xid = await aborted_xid(aconn)
    findings = Findings()

    problems = await invariants._settlement(aconn, committed_settlement(xid=xid), findings, 0)

    assert problems == [f"the engine settled commit {xid} as committed, PostgreSQL says aborted"]
    assert findings.stats["settled_committed_by_another"] == 0


async def test_committed_is_a_violation_when_the_ledger_holds_other_content_under_the_id(aconn):
    await aconn.execute(NEW_INSTANCE)
    xid = await aborted_xid(aconn)
    await aconn.execute(LEDGER_ROW)  # the same transition id, with another content
    findings = Findings()

    settled = committed_settlement("1" * 64, xid=xid)
    problems = await invariants._settlement(aconn, settled, findings, 0)

    assert problems == [f"the engine settled commit {xid} as committed, PostgreSQL says aborted"]
    assert findings.stats["settled_committed_by_another"] == 0


async def test_a_write_settled_committed_by_its_session_with_other_content_is_a_violation(aconn):
    await aconn.execute(NEW_INSTANCE)
    await aconn.execute(LEDGER_ROW)  # the same transition id, with another content
    settled = committed_settlement("1" * 64, pid=1)

    problems = await invariants._session_settlement(aconn, settled, [], Findings())

    assert problems == [
        "the write of ['i1#1'] settled as committed but the ledger holds ['i1#1'] with other "
        "content"
    ]
