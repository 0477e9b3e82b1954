"""Statements that know which work rows they want (a lease holder's write, the rows a
claim or the deadline sweep chose, an instance's parked work) find them by their key or
their instance, whatever the planner's statistics say.

A worker's statements are prepared, and PostgreSQL soon plans a prepared statement
generically: the store's clock is then a parameter of unknown value. Had the lease's
time conditions been index ranges (``lease_expires_at > now``, ``deadline > now``), the
small partial indexes that start with those columns looked as cheap as the key when
few leases were held at the last ANALYZE, and every step's write walked every open
work row's index entry to find its own (seen in ``bench.compare``: a quarter of the
group commit's server time at 16 leases, growing with the backlog).
"""

from __future__ import annotations

import json
import re
from typing import Any

import psycopg
import pytest

from engine.store.rows import WorkState
from engine.store.statements import leases as sql
from engine.store.statements import transitions as transition_sql

HOLDER_WRITES = {
    "renew": sql.RENEW_LEASE,
    "check": sql.CHECK_LEASE,
    "complete": sql.COMPLETE_LEASE,
    "retry": sql.RETRY_LEASE,
    "park": sql.PARK_LEASE,
    "dead-letter": sql.DEAD_LETTER_LEASE,
    "fenced write": sql.FENCED_WRITE,
}
WORK_ROWS = 20_000
LEASED_AT_ANALYZE = 20
"""A cluster's usual state: many finished work rows, a few leases held."""
OPENED_AFTER = 5_000
"""Work opened after the ANALYZE (a backlog arriving): statistics do not know it."""

SEED = """
INSERT INTO work (work_id, kind, instance_id, sequence, available_at, deadline, state,
                  lease_owner, lease_token, lease_expires_at)
SELECT 'i' || g || '#2#activity#charge-card', 1, 'i' || g, 2, now(), now() + interval '1 hour',
       CASE WHEN g %% %(every)s = 0 THEN %(leased)s ELSE %(done)s END, 'owner', 1,
       CASE WHEN g %% %(every)s = 0 THEN now() + interval '30 s' END
FROM generate_series(1, %(rows)s) g
"""
"""Work ids as the engine makes them (the instance id, '#', then more): the key's entries
are about twice the size of ``work_instance_idx``'s, which made that index look cheaper."""
OPEN_MORE = """
UPDATE work SET state = %(leased)s, lease_expires_at = now() + interval '30 s'
WHERE state = %(done)s AND instance_id IN (SELECT 'i' || g FROM generate_series(1, %(n)s) g)
"""
BOUNDED = {
    "work_pkey": {"instance_id", "work_id"},
    "work_instance_idx": {"instance_id", "sequence"},
}
"""What an index read of one known work row must name to read only a few rows: the key,
or the row's position (the rows one transition created)."""
PLACEHOLDER = re.compile(r"%\((\w+)\)s")


@pytest.fixture
def planned(conn: psycopg.Connection) -> psycopg.Connection:
    """``conn`` on a work table in the shape above, planning prepared statements
    generically (as a long-running worker's are)."""
    states = {"leased": WorkState.LEASED, "done": WorkState.COMPLETED}
    conn.execute("SET session_replication_role = replica")  # rows alone: no instances
    conn.execute(SEED, {**states, "every": WORK_ROWS // LEASED_AT_ANALYZE, "rows": WORK_ROWS})
    conn.execute("ANALYZE work")
    conn.execute(OPEN_MORE, {**states, "n": OPENED_AFTER})
    conn.execute("SET session_replication_role = DEFAULT")
    conn.execute("SET plan_cache_mode = force_generic_plan")
    return conn


@pytest.mark.parametrize("name", sorted(HOLDER_WRITES))
def test_a_holders_write_reads_work_by_its_key(planned: psycopg.Connection, name: str) -> None:
    indexes = _work_indexes(_generic_plan(planned, HOLDER_WRITES[name]))
    assert indexes and indexes <= {"work_pkey"}, f"{name} reads work through {indexes}"


def test_a_set_finishes_its_members_leases_by_key_or_position(
    planned: psycopg.Connection,
) -> None:
    """A set completes each member's lease in its ``finished`` part. With about one
    work row per instance at the last ANALYZE (a young cluster), the instance alone
    looked as selective as the key, and the generic plan found the row through
    ``work_instance_idx`` by its instance alone and filtered on its id: for a
    code-first instance of thousands of work rows, every step read all of them. The
    row's position (its history sequence) now bounds that read too."""
    [finished] = _parts(_generic_plan(planned, sql.FENCED_SET), "CTE finished")
    read = _work_index_conditions(finished)
    assert read and all(i in BOUNDED and BOUNDED[i] <= names for i, names in read.items()), read


def test_a_sets_members_read_work_by_their_key(planned: psycopg.Connection) -> None:
    """``FENCED_SET`` checks each member's lease with the same condition (``SET_HELD``)."""
    statement = f"""
    SELECT 1 FROM json_to_recordset(%(members)s::json)
        AS i(work_instance text, work_id text, owner text, token bigint, epoch uuid)
    CROSS JOIN LATERAL (SELECT 1 FROM work w WHERE {sql.SET_HELD} FOR UPDATE) h
    """
    indexes = _work_indexes(_generic_plan(planned, statement))
    assert indexes == {"work_pkey"}


@pytest.mark.parametrize("part", ["CTE claimed", "CTE locked_expired"])
def test_a_claim_leases_the_rows_it_chose_by_their_key(
    planned: psycopg.Connection, part: str
) -> None:
    """The claim finds due and expired work through its indexes, then locks and leases
    the few rows it chose: those it reads by their key."""
    [node] = _parts(_generic_plan(planned, sql.CLAIM), part)
    assert _work_indexes(node) == {"work_pkey"}


def test_the_deadline_sweep_dead_letters_the_rows_it_found_by_their_key(
    planned: psycopg.Connection,
) -> None:
    update = _generic_plan(planned, sql.SWEEP_DEADLINES)
    [found] = _parts(update, "CTE overdue")
    update["Plans"].remove(found)
    assert _work_indexes(update) == {"work_pkey"}


def test_a_resume_rearms_its_instances_work_through_the_instance(
    planned: psycopg.Connection,
) -> None:
    indexes = _work_indexes(_generic_plan(planned, transition_sql.REARM_PARKED_WORK))
    assert len(indexes) == 1 and indexes <= {"work_pkey", "work_instance_idx"}, indexes


def _generic_plan(conn: psycopg.Connection, statement: str) -> dict[str, Any]:
    """The generic plan of ``statement`` (psycopg placeholders), every parameter NULL."""
    names = list(dict.fromkeys(PLACEHOLDER.findall(statement)))
    numbered = PLACEHOLDER.sub(lambda m: f"${names.index(m.group(1)) + 1}", statement)
    conn.execute(f"PREPARE holder_write AS {numbered}")
    try:
        nulls = ", ".join(["NULL"] * len(names))
        [(plan,)] = conn.execute(f"EXPLAIN (FORMAT JSON) EXECUTE holder_write({nulls})")
    finally:
        conn.execute("DEALLOCATE holder_write")
    return (plan if isinstance(plan, list) else json.loads(plan))[0]["Plan"]


def _work_indexes(node: dict[str, Any]) -> set[str]:
    """The indexes through which the plan reads table ``work`` (a sequential scan counts
    as "seq scan"; the write itself, a ModifyTable node, is not a read)."""
    return set(_work_index_conditions(node))


def _work_index_conditions(node: dict[str, Any]) -> dict[str, set[str]]:
    """``_work_indexes``, each with the columns its index condition names (none for a
    sequential scan)."""
    found: dict[str, set[str]] = {}
    if node.get("Relation Name") == "work" and node["Node Type"].endswith("Scan"):
        columns = set(re.findall(r"\b(\w+) = ", node.get("Index Cond", "")))
        found[node.get("Index Name", node["Node Type"].lower())] = columns
    for child in node.get("Plans", ()):
        for index, columns in _work_index_conditions(child).items():
            found.setdefault(index, set()).update(columns)
    return found


def _parts(node: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """The plan's nodes named ``name`` (a CTE's is "CTE <its name>")."""
    found = [node] if node.get("Subplan Name") == name else []
    for child in node.get("Plans", ()):
        found += _parts(child, name)
    return found
