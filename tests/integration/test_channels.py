"""A store on a schema of any allowed length announces its work and its ends.

A schema name may have 63 characters and a PostgreSQL channel name no more: a channel
named ``<schema>_work`` would then be refused by ``pg_notify``, and with it every
transition that makes work due or ends an instance.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest
from psycopg import sql

from engine.api.client import Client
from engine.decide.operator_actions import Action
from engine.model.instance import InstanceStatus
from engine.store.channels import MAX_CHANNEL_BYTES, ended_channel, work_channel
from engine.store.clock import DatabaseClock
from engine.store.migrations import apply_migrations
from tests.integration.factories import DEFINITION, open_store

LONGEST_SCHEMA_NAME = 63


@pytest.fixture
def long_schema(pg_dsn: str) -> Iterator[str]:
    name = f"t_{uuid.uuid4().hex}".ljust(LONGEST_SCHEMA_NAME, "x")
    apply_migrations(pg_dsn, name)
    yield name
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))


def test_channels_stay_within_postgres_limit_and_apart() -> None:
    first, second = "a" * 63, "a" * 62 + "b"
    names = {work_channel(first), ended_channel(first), work_channel(second)}
    assert len(names) == 3
    assert all(len(name) <= MAX_CHANNEL_BYTES for name in names)
    assert work_channel("wayline") == "wayline_work"


async def test_a_store_on_the_longest_schema_name_announces_work_and_ends(
    pg_dsn: str, long_schema: str
) -> None:
    async with open_store(pg_dsn, long_schema, DatabaseClock()) as store:
        listener = await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True)
        try:
            await listener.execute(f"LISTEN {store.channel}")
            await listener.execute(f"LISTEN {store.ended_channel}")
            client = Client(store)
            await client.publish(DEFINITION)
            await client.start(DEFINITION.name, "long-1")  # makes its first step due now
            await client.command("long-1", Action.TERMINATE, "ann", "a test")  # ends it
            ended = await client.wait("long-1", timedelta(seconds=30))
            heard = [(n.channel, n.payload) async for n in listener.notifies(stop_after=2)]
        finally:
            await listener.close()
    assert ended.status is InstanceStatus.TERMINATED
    (work_channel, offer), end = heard  # the start offers its first step (engine.store.offers)
    assert (work_channel, end) == (store.channel, (store.ended_channel, "long-1"))
    assert [row["instance_id"] for row in json.loads(offer)["work"]] == ["long-1"]
