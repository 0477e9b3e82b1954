"""The benchmark's bulk-written ended instances are real instances: each replays to the
completed state of the engine-committed template it was copied from, under its own ids,
created in the past year, and retention exports and removes it as it would one of the
engine's own. Otherwise 10^7 rows of them would measure something else."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import psycopg

from bench import ended_rows
from bench.histories import build_history, long_definition
from engine.model.instance import InstanceStatus
from engine.model.registry import Registry
from engine.store import catalog, reads, retention
from engine.store.store import Store

COPIES = 3


async def test_copies_replay_and_retention_removes_them(
    db_store: Store, conn: psycopg.Connection, schema: str, tmp_path: Path
) -> None:
    definition = long_definition(ended_rows.STEPS, version="ended")
    registry = Registry([definition])
    await catalog.publish(db_store, definition, "bench")
    await db_store.commit_all(build_history(definition, registry, ended_rows.TEMPLATE_ID))
    template = await reads.load(db_store, registry, ended_rows.TEMPLATE_ID)

    ended_rows.add_ended(conn, schema, COPIES)

    ids = [f"{ended_rows.PREFIX}{k:0{ended_rows.ID_DIGITS}d}" for k in range(COPIES)]
    first, end = ended_rows.span(conn)
    for instance_id in ids:
        copy = await reads.load(db_store, registry, instance_id)
        assert copy.state.status is InstanceStatus.COMPLETED
        assert copy.state.sequence == template.state.sequence == 32
        row = await reads.get_instance(db_store, instance_id)
        assert first <= row.created_at < end and row.archived_at is not None
    keys = conn.execute(
        "SELECT DISTINCT idempotency_key FROM history WHERE instance_id = %s AND "
        "idempotency_key <> ''",
        [ids[1]],
    ).fetchall()
    assert keys and all(key.startswith(ids[1] + "/") for (key,) in keys)
    assert ended_rows.template_rows(conn, schema) == {
        "instances": 1,
        "history": 32,
        "transitions": 21,
        "work": 10,
    }

    with retention.ExportFile(tmp_path / "export.jsonl") as export:
        done = await retention.prune(db_store, "", timedelta(days=20), export)
    assert (done.exported, done.removed) == (COPIES, COPIES)  # the template ended a day ago
    left = conn.execute("SELECT count(*) FROM history WHERE instance_id LIKE 'ended-0%'")
    assert left.fetchone()[0] == 0
