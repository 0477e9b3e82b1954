"""Fixtures for tests against a real PostgreSQL.

One server per test session: a private cluster started with `EmbeddedPostgres` under
pytest's tmp dir (random port, its own socket dir, so it never clashes with a server on
5432), or the server named by `WAYLINE_TEST_DSN`. Each test gets a migrated schema of its own,
much cheaper than a database per test and still fully isolated: one an earlier test used,
emptied and renamed (``tests/integration/schema_pool.py``), or one migrated when none is
spare.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from engine.api.client import Client
from engine.store.clock import DatabaseClock, ManualClock
from engine.store.embedded import EmbeddedPostgres, EmbeddedPostgresError, find_pg_bin
from engine.store.store import DEFAULT_POOL_SIZE, Store
from engine.worker.activities import ActivityRegistry
from engine.worker.leased_commits import Context
from tests.integration.code_runs import published, worker_context
from tests.integration.factories import open_store
from tests.integration.schema_pool import SchemaPool, drop_schema
from tests.integration.transition_builders import SINGLE, single_definition

TEST_DSN_ENV = "WAYLINE_TEST_DSN"


@pytest.fixture(scope="session")
def pg_dsn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A DSN for the session's PostgreSQL server."""
    external = os.environ.get(TEST_DSN_ENV)
    if external:
        yield external
        return
    server = EmbeddedPostgres(tmp_path_factory.mktemp("postgres") / "data")
    try:
        dsn = server.start()
        _without_flushes(dsn)
        yield dsn
    finally:
        server.stop()


def _without_flushes(dsn: str) -> None:
    """The session's private cluster does not flush its writes to disk (``fsync`` off):
    every commit of the suite otherwise waits for the disk (about 1.3 ms on these hosts,
    most of a test's commit). No test crashes the machine, only processes, whose writes
    the OS keeps, and none crashes this cluster. The clusters that are themselves
    crashed and restarted (a drill's, ``cluster``, a standby pair) keep the default, as
    does the benchmark's."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET fsync = off")
        conn.execute("SELECT pg_reload_conf()")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EmbeddedPostgres]:
    """A private cluster of the test's own, not started: one a test may stop or kill
    and start again, on its port (a restart keeps the DSN its clients hold)."""
    try:
        find_pg_bin()
    except EmbeddedPostgresError:
        if os.environ.get(TEST_DSN_ENV):
            pytest.skip("PostgreSQL binaries are not installed here")
        raise
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = EmbeddedPostgres(tmp_path / "data", port=port)
    try:
        yield server
    finally:
        server.start()  # adopt what a test left (killed or stopped), then stop it
        server.stop()


@pytest.fixture
def schema_name(pg_dsn: str) -> Iterator[str]:
    """A unique schema name, not created; whatever the test creates under it is dropped."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    yield name
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        drop_schema(conn, name)


@pytest.fixture(scope="session")
def schema_pool(pg_dsn: str) -> Iterator[SchemaPool]:
    """The session's migrated schemas, handed from one test to the next."""
    pool = SchemaPool(pg_dsn)
    yield pool
    pool.close()


@pytest.fixture
def schema(schema_pool: SchemaPool, schema_name: str) -> Iterator[str]:
    """A schema with every migration applied, as a fresh migration makes it, though most
    often one an earlier test used and the pool emptied (``schema_pool``)."""
    schema_pool.take(schema_name)
    yield schema_name
    schema_pool.give_back(schema_name)


@pytest.fixture
def conn(pg_dsn: str, schema: str) -> Iterator[psycopg.Connection]:
    """An autocommit connection whose search_path is the test's schema."""
    with psycopg.connect(pg_dsn, autocommit=True) as connection:
        connection.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        yield connection


@pytest.fixture
async def aconn(pg_dsn: str, schema: str) -> AsyncIterator[psycopg.AsyncConnection]:
    """An async autocommit connection whose search_path is the test's schema."""
    async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as connection:
        await connection.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        yield connection


@pytest.fixture
def clock(request: pytest.FixtureRequest) -> ManualClock:
    """A manual clock at the test module's ``T0``, for time-precise lease tests."""
    return ManualClock(request.module.T0)


@pytest.fixture
async def store(pg_dsn: str, schema: str, clock: ManualClock) -> AsyncIterator[Store]:
    """A store whose every statement reads ``clock``; modules that want PostgreSQL's
    own clock take ``db_store`` (or define their own ``store``)."""
    async with open_store(pg_dsn, schema, clock) as opened:
        yield opened


@pytest.fixture
async def default_store(pg_dsn: str, schema: str) -> AsyncIterator[Store]:
    """A store as ``Store.open`` makes it by default: PostgreSQL's clock, the full pool."""
    async with open_store(pg_dsn, schema, max_size=DEFAULT_POOL_SIZE) as opened:
        yield opened


@pytest.fixture
async def db_store(pg_dsn: str, schema: str) -> AsyncIterator[Store]:
    """A store on PostgreSQL's own clock."""
    async with open_store(pg_dsn, schema, DatabaseClock()) as opened:
        yield opened


@pytest.fixture
async def single_client(default_store: Store) -> Client:
    """A client of a store where ``SINGLE@1`` is published and instance ``running`` of
    it started: what the checks of a client's inputs need before they are refused."""
    client = Client(default_store)
    await client.publish(single_definition("1"))
    await client.start(SINGLE, "running")
    return client


@pytest.fixture
async def client(store: Store, code_app: ActivityRegistry) -> Client:
    """A client once every workflow of the module's ``code_app`` is published (a module
    of code-first tests defines ``code_app``; other modules define their own ``client``)."""
    return await published(store, code_app)


@pytest.fixture
def ctx(store: Store, code_app: ActivityRegistry) -> Context:
    """A worker's context that runs the module's ``code_app``."""
    return worker_context(store, code_app)
