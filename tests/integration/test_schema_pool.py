"""The session's schema pool hands a test a schema a fresh migration would make: the
rows an earlier test wrote gone, the migrations' own rows back, identities restarted,
the functions' search_path following the new name, and a schema whose catalog a test
changed never handed on."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from engine.api.client import Client
from engine.store.migrations import apply_migrations
from tests.integration.factories import open_store
from tests.integration.schema_pool import SchemaPool, drop_schema
from tests.integration.transition_builders import SINGLE, single_definition


@pytest.fixture
def pool(pg_dsn: str) -> Iterator[SchemaPool]:
    """A pool of the test's own, apart from the session's."""
    made = SchemaPool(pg_dsn)
    yield made
    made.close()


@pytest.fixture
def names(pg_dsn: str) -> Iterator[list[str]]:
    """Schema names for the test, each dropped afterwards if it is still there."""
    made = [f"t_{uuid.uuid4().hex[:16]}" for _ in range(3)]
    yield made
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for name in made:
            drop_schema(conn, name)


def _contents(conn: psycopg.Connection, schema: str) -> dict[str, list[tuple[object, ...]]]:
    """Every table's rows, the store's epoch left out (a new store makes its own)."""
    tables = conn.execute(
        "SELECT relname FROM pg_class WHERE relnamespace = %s::regnamespace AND relkind = 'r'"
        " AND relname NOT IN ('store_epoch', 'schema_migrations')",
        (schema,),
    ).fetchall()
    ledger = sql.SQL("SELECT version, name, checksum FROM {} ORDER BY 1")
    ledger_rows = conn.execute(ledger.format(sql.Identifier(schema, "schema_migrations")))
    contents = {"ledger": ledger_rows.fetchall()}
    for (table,) in tables:
        query = sql.SQL("SELECT * FROM {}").format(sql.Identifier(schema, table))
        contents[table] = conn.execute(query).fetchall()
    return contents


def _audit(conn: psycopg.Connection, schema: str) -> int:
    """Write an account audit entry into ``schema``; its identity."""
    insert = sql.SQL(
        "INSERT INTO {} (team_id, actor, action, username) VALUES ('t', 'a', 'added', 'u')"
        " RETURNING entry_id"
    ).format(sql.Identifier(schema, "studio_account_audit"))
    (entry,) = conn.execute(insert).fetchone() or (0,)
    return int(entry)


async def test_a_used_schema_is_handed_on_as_a_fresh_migration_makes_it(
    pool: SchemaPool, pg_dsn: str, names: list[str]
) -> None:
    used, handed, fresh = names
    pool.take(used)
    async with open_store(pg_dsn, used) as store:
        client = Client(store)
        await client.publish(single_definition("1"))
        await client.start(SINGLE, "running")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert [_audit(conn, used), _audit(conn, used)] == [1, 2]
    pool.give_back(used)
    pool.take(handed)
    apply_migrations(pg_dsn, fresh)

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT to_regnamespace(%s)", (used,)).fetchone() == (None,)
        assert _contents(conn, handed) == _contents(conn, fresh)
        assert any(_contents(conn, handed).values())  # the ledger, at least
        for schema in (handed, fresh):
            epochs = sql.SQL("SELECT count(*) FROM {}").format(
                sql.Identifier(schema, "store_epoch")
            )
            assert conn.execute(epochs).fetchone() == (1,)
            # a function that sets its own search_path finds its schema by the new name
            since = sql.SQL("SELECT {}.serving_since() IS NOT NULL").format(sql.Identifier(schema))
            assert conn.execute(since).fetchone() == (True,)
            assert _audit(conn, schema) == 1  # its identity restarted


def test_a_schema_whose_catalog_a_test_changed_is_not_handed_on(
    pool: SchemaPool, pg_dsn: str, names: list[str]
) -> None:
    changed, next_one, _ = names
    pool.take(changed)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE TABLE {} (n int)").format(sql.Identifier(changed, "extra")))
    pool.give_back(changed)
    pool.take(next_one)

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        kept = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{changed}.extra",)).fetchone()
        assert kept == (True,)  # left where it was, for the test's teardown to drop
        handed = conn.execute(
            "SELECT to_regclass(%s) IS NOT NULL", (f"{next_one}.extra",)
        ).fetchone()
        assert handed == (False,)


def test_a_schema_a_left_connection_still_uses_is_not_handed_on(
    pool: SchemaPool, pg_dsn: str, names: list[str]
) -> None:
    pool.lock_timeout = "100ms"
    used, next_one, _ = names
    pool.take(used)
    with psycopg.connect(pg_dsn) as left:  # a transaction open on one of its tables
        left.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(used, "work")))
        pool.give_back(used)
    pool.take(next_one)

    assert pool.spare == []
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        kept = conn.execute("SELECT to_regnamespace(%s) IS NOT NULL", (used,)).fetchone()
        assert kept == (True,)  # left where it was, for the test's teardown to drop
