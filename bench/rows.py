"""Many started instances at once, written by one INSERT ... SELECT generate_series.

W2 and W4 need 10^4 to 10^6 instances; starting them one by one through the client would
take longer than the whole benchmark. The statement below writes exactly what a start
commits for the benchmark's three-step definition, minus the transition ledger row:
the instance row at sequence 2, its history (``instance_started``, then
``activity_scheduled`` for step ``one``) and the due work row for that activity, with the
same work id and dispatch payload the engine derives. So the rows replay, and a worker
could run them. Data-modifying CTEs make it one statement: foreign keys are checked at
its end, when all three tables are written.
"""

from __future__ import annotations

import time

import psycopg

from bench.cluster import PROBE
from engine.model.definitions import DefinitionRef

STARTED_INSTANCES = (
    PROBE
    + """
WITH created AS (
    INSERT INTO {schema}.instances (instance_id, definition_name, definition_version,
                                   definition_fingerprint, status, sequence, created_at,
                                   updated_at)
    SELECT %(prefix)s || k, %(name)s, %(version)s, %(fingerprint)s, 1, 2,
           %(base)s::timestamptz + k * interval '1 millisecond',
           %(base)s::timestamptz + k * interval '1 millisecond'
    FROM generate_series(%(start)s::bigint, %(stop)s::bigint - 1) k
    RETURNING instance_id, created_at
),
events AS (
    INSERT INTO {schema}.history (instance_id, sequence, kind, occurred_at, definition_name,
                                 definition_version, definition_fingerprint, step_name)
    SELECT c.instance_id, e.sequence, e.kind, c.created_at,
           CASE WHEN e.sequence = 1 THEN %(name)s ELSE '' END,
           CASE WHEN e.sequence = 1 THEN %(version)s ELSE '' END,
           CASE WHEN e.sequence = 1 THEN %(fingerprint)s ELSE '' END,
           CASE WHEN e.sequence = 1 THEN '' ELSE 'one' END
    FROM created c CROSS JOIN (VALUES (1, 1::smallint), (2, 11::smallint)) e(sequence, kind)
    RETURNING instance_id, sequence, occurred_at
)
INSERT INTO {schema}.work (work_id, kind, instance_id, sequence, available_at, deadline,
                           payload, target)
SELECT e.instance_id || '#2#activity#one', 1, e.instance_id, 2, e.occurred_at,
       e.occurred_at + interval '8 days',
       convert_to('{{"attempt":1,"key":"' || e.instance_id || '/one/1","step":"one"}}', 'UTF8'),
       %(target)s
FROM events e WHERE e.sequence = 2
"""
)


def add_started_instances(
    conn: psycopg.Connection,
    schema: str,
    prefix: str,
    start: int,
    stop: int,
    definition: DefinitionRef,
    target: str,
) -> float:
    """Write instances ``prefix || k`` for k in [start, stop); returns the seconds taken.

    Their times begin a day ago, a millisecond apart, so their work is due now and in a
    stable order. Its deadline is a week ahead: writing 10^6 rows takes over a minute,
    and rows past their deadline would sit at the head of the due index, where every
    claim steps over them until the deadline sweep dead-letters them (that is the
    sweep's cost, not a claim's).
    """
    base = conn.execute(f"{PROBE} SELECT now() - interval '1 day'").fetchone()[0]
    began = time.perf_counter()
    conn.execute(
        STARTED_INSTANCES.format(schema=schema),
        {
            "prefix": prefix,
            "start": start,
            "stop": stop,
            "name": definition.name,
            "version": definition.version,
            "fingerprint": definition.fingerprint,
            "target": target,
            "base": base,
        },
    )
    return time.perf_counter() - began
