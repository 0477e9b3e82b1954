"""Migrated schemas that a test session empties and hands on, instead of migrating one a test.

Migrating a schema runs every file of ``migrations/`` (about 0.25 s on a 2-core host,
dropping it 0.03 s more), and some 600 tests ask for one. A schema a test is done with
is instead emptied (every row deleted, the sequences restarted, the rows the migrations
wrote copied back from a template migrated once a session) and renamed to the next
test's name: about 0.05 s in all. On ``tests/integration/test_[a-d]*.py`` the fixtures'
setup and teardown took 108 s before, 29 s after. A schema whose catalog the test
changed (a table added, renamed or altered, a function made, a grant given) is not
handed on: it is dropped, as before, so the next test's schema is always what a fresh
migration makes (``tests/integration/test_schema_pool.py`` holds the pool to that).
"""

from __future__ import annotations

import graphlib
import uuid

import psycopg
from psycopg import sql

from engine.store.migrations import apply_migrations

REMADE = "store_epoch"
"""The table a migration fills with a row of its moment (0032: a new store's epoch,
dated when it is made): made anew, as a new store's, not copied from the template."""
EMPTYING_LOCK_TIMEOUT = "2s"
"""How long emptying waits for the tables while a connection the test left still uses
one; past it the schema is dropped instead (the drop then waits as it always did)."""

CATALOG = """
SELECT md5(string_agg(replace(item, %(name)s::text, '$schema'), E'\\n' ORDER BY item))
FROM (
    SELECT format('schema %%s', nspacl) FROM pg_namespace WHERE oid = %(name)s::regnamespace
    UNION ALL
    SELECT format('class %%s %%s %%s %%s', relname, relkind, relpersistence, relacl)
    FROM pg_class WHERE relnamespace = %(name)s::regnamespace
    UNION ALL
    SELECT format('column %%s.%%s %%s %%s %%s %%s', c.relname, a.attname,
                  a.atttypid::regtype, a.attnotnull, a.attisdropped,
                  pg_get_expr(d.adbin, d.adrelid))
    FROM pg_attribute a
    JOIN pg_class c ON c.oid = a.attrelid
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE c.relnamespace = %(name)s::regnamespace AND a.attnum > 0
    UNION ALL
    SELECT format('index %%s', pg_get_indexdef(i.indexrelid))
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
    WHERE c.relnamespace = %(name)s::regnamespace
    UNION ALL
    SELECT format('constraint %%s %%s', conname, pg_get_constraintdef(oid))
    FROM pg_constraint WHERE connamespace = %(name)s::regnamespace
    UNION ALL
    SELECT format('function %%s %%s %%s %%s', oid::regprocedure, md5(prosrc), proconfig, proacl)
    FROM pg_proc WHERE pronamespace = %(name)s::regnamespace
    UNION ALL
    SELECT format('trigger %%s %%s %%s', tgrelid::regclass, tgname, tgenabled)
    FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
    WHERE c.relnamespace = %(name)s::regnamespace AND NOT t.tgisinternal
    UNION ALL
    SELECT format('type %%s', typname) FROM pg_type WHERE typnamespace = %(name)s::regnamespace
    UNION ALL
    SELECT format('policy %%s %%s', polrelid::regclass, polname)
    FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid
    WHERE c.relnamespace = %(name)s::regnamespace
) AS catalog (item)
"""
"""A digest of what a schema's catalog holds, its own name written as ``$schema``: the
same for every schema the migrations made and no test has changed."""

REFERENCES = """
SELECT referencing.relname, referenced.relname
FROM pg_constraint AS k
JOIN pg_class AS referencing ON referencing.oid = k.conrelid
JOIN pg_class AS referenced ON referenced.oid = k.confrelid
WHERE k.connamespace = %s::regnamespace AND k.contype = 'f'
"""
"""Each foreign key's referencing and referenced table."""

SETTINGS = """
SELECT oid::regprocedure::text FROM pg_proc
WHERE pronamespace = %s::regnamespace AND proconfig IS NOT NULL
"""
"""The functions with settings of their own: the migrations give some a ``search_path``
of their schema (0026, 0029, 0032), which a rename must follow."""


class SchemaPool:
    """A session's migrated schemas: ``take`` one under a test's name, ``give_back`` it."""

    def __init__(self, dsn: str, lock_timeout: str = EMPTYING_LOCK_TIMEOUT) -> None:
        self.dsn = dsn
        self.lock_timeout = lock_timeout
        self.template = f"t_template_{uuid.uuid4().hex[:12]}"
        apply_migrations(dsn, self.template)
        with psycopg.connect(dsn, autocommit=True) as conn:
            self.catalog = _catalog(conn, self.template)
            self.tables = _tables(conn, self.template)
            self.sequences = _sequences(conn, self.template)
            filled = [table for table in self.tables if _has_rows(conn, self.template, table)]
        self.copied = [table for table in filled if table != REMADE]
        self.spare: list[str] = []

    def take(self, name: str) -> None:
        """Make schema ``name``: a spare one renamed, or one migrated when none is spare."""
        if not self.spare:
            apply_migrations(self.dsn, name)
            return
        with psycopg.connect(self.dsn, autocommit=True) as conn, conn.transaction():
            _rename(conn, self.spare.pop(), name)

    def give_back(self, name: str) -> None:
        """Empty schema ``name`` and keep it as a spare, unless its catalog is no longer
        what the migrations made or it cannot be emptied now: then leave it, to be
        dropped under its name."""
        spare = f"t_spare_{uuid.uuid4().hex[:12]}"
        try:
            with psycopg.connect(self.dsn, autocommit=True) as conn, conn.transaction():
                if _catalog(conn, name) != self.catalog:
                    return
                conn.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(self.lock_timeout))
                self._empty(conn, name)
                conn.execute(_alter_schema(name, spare))
        except (psycopg.errors.LockNotAvailable, psycopg.errors.InvalidSchemaName):
            return  # held by a connection the test left, or dropped by the test itself
        self.spare.append(spare)

    def close(self) -> None:
        """Drop the template and every spare schema."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            for name in [self.template, *self.spare]:
                drop_schema(conn, name)
        self.spare.clear()

    def _empty(self, conn: psycopg.Connection, name: str) -> None:
        """One round trip: every table locked (a statement of a connection the test
        left, still running, ends first, and none writes until the schema has its
        spare name), every row deleted (a referencing table before the table it
        references), the migrations' rows back, the sequences restarted. Deleting the
        few rows a test wrote costs less than truncating: no table gets new files."""
        tables = [sql.Identifier(name, table) for table in self.tables]
        statements = [
            sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(sql.SQL(", ").join(tables))
        ]
        statements += [sql.SQL("DELETE FROM {}").format(table) for table in tables]
        statements += [
            sql.SQL("INSERT INTO {} SELECT * FROM {}").format(
                sql.Identifier(name, table), sql.Identifier(self.template, table)
            )
            for table in self.copied
        ]
        statements.append(
            sql.SQL("INSERT INTO {} DEFAULT VALUES").format(sql.Identifier(name, REMADE))
        )
        statements += [
            sql.SQL("SELECT setval({}, {}, false)").format(f"{name}.{sequence}", start)
            for sequence, start in self.sequences
        ]
        conn.execute(sql.SQL("; ").join(statements))


def _catalog(conn: psycopg.Connection, name: str) -> str:
    (digest,) = conn.execute(CATALOG, {"name": name}).fetchone() or (None,)
    return str(digest)


def _tables(conn: psycopg.Connection, name: str) -> list[str]:
    """The tables of schema ``name``, each after every table that references it."""
    query = "SELECT relname FROM pg_class WHERE relnamespace = %s::regnamespace AND relkind = 'r'"
    order = graphlib.TopologicalSorter({row[0]: set() for row in conn.execute(query, (name,))})
    for child, parent in conn.execute(REFERENCES, (name,)):
        if child != parent:
            order.add(parent, child)
    return list(order.static_order())


def _sequences(conn: psycopg.Connection, name: str) -> list[tuple[str, int]]:
    query = "SELECT sequencename, start_value FROM pg_sequences WHERE schemaname = %s"
    return [(sequence, int(start)) for sequence, start in conn.execute(query, (name,))]


def _has_rows(conn: psycopg.Connection, name: str, table: str) -> bool:
    query = sql.SQL("SELECT EXISTS (SELECT FROM {})").format(sql.Identifier(name, table))
    (found,) = conn.execute(query).fetchone() or (False,)
    return bool(found)


def _rename(conn: psycopg.Connection, old: str, new: str) -> None:
    conn.execute(_alter_schema(old, new))
    for function in [row[0] for row in conn.execute(SETTINGS, (new,))]:
        conn.execute(
            sql.SQL("ALTER FUNCTION {} SET search_path TO {}").format(
                sql.SQL(function), sql.Identifier(new)
            )
        )


def drop_schema(conn: psycopg.Connection, name: str) -> None:
    """Drop schema ``name`` and all in it, if it is there."""
    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _alter_schema(old: str, new: str) -> sql.Composed:
    return sql.SQL("ALTER SCHEMA {} RENAME TO {}").format(sql.Identifier(old), sql.Identifier(new))
