"""A worker process, a client and the CLI on a multi-host URL across a promotion.

A primary and its synchronous standby (``verification.standby.StandbyPair``) are named
by one URL (``postgresql://p,s/db?target_session_attrs=read-write``). The primary is
SIGKILLed and the standby promoted while a ``wayline worker`` runs: the same worker
process, never restarted, must run the next instance on the promoted server, the
instance run before must be there, and every effect must have happened once.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.model.instance import InstanceStatus
from engine.store.embedded import EmbeddedPostgresError, find_pg_bin
from engine.store.errors import CommitUnknown, StoreError
from engine.store.migrations import apply_migrations
from engine.store.store import Store
from examples.orders import EFFECTS_ENV
from tests.e2e import definitions as d
from tests.e2e.app import Behaviour, script
from tests.e2e.conftest import Harness
from tests.e2e.test_worker_e2e import assert_once_per_key
from verification.standby import StandbyPair

try:
    find_pg_bin()
except EmbeddedPostgresError:
    if os.environ.get("WAYLINE_TEST_DSN"):
        pytest.skip("PostgreSQL server binaries are not installed here", allow_module_level=True)

SCHEMA = "failover_e2e"


@pytest.fixture
async def pair_harness(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[StandbyPair, Harness]]:
    """A harness whose store, workers and CLI all use the pair's multi-host URL."""
    with StandbyPair.start(tmp_path / "servers", synchronous=True) as pair:
        apply_migrations(pair.multi_host_url, SCHEMA)
        store = await Store.open(pair.multi_host_url, SCHEMA)
        harness = Harness(pair.multi_host_url, SCHEMA, store, tmp_path)
        monkeypatch.setenv(EFFECTS_ENV, str(harness.effects))
        try:
            yield pair, harness
        finally:
            await harness.close()


async def start_until_written(harness: Harness, instance_id: str) -> None:
    """Start ``instance_id``, again while the answer is "not written" (never unknown)."""

    async def started() -> bool:
        try:
            await harness.start(d.SINGLE, instance_id, script({"only": Behaviour()}))
        except CommitUnknown:
            raise
        except StoreError:
            return False
        return True

    await harness.until(started, what=f"{instance_id} to start on the promoted server")


async def test_a_worker_on_a_multi_host_url_carries_on_after_the_standby_is_promoted(
    pair_harness: tuple[StandbyPair, Harness],
) -> None:
    pair, e2e = pair_harness
    (worker,) = await e2e.spawn()
    await e2e.start(d.SINGLE, "before", script({"only": Behaviour()}))
    await e2e.settled("before", InstanceStatus.COMPLETED)
    pair.kill_primary()
    pair.promote()
    await start_until_written(e2e, "after")
    await e2e.settled("after", InstanceStatus.COMPLETED)
    assert worker.process.returncode is None, "the worker had to be restarted"
    assert (await e2e.state("before")).status is InstanceStatus.COMPLETED
    assert_once_per_key(e2e.records())
    assert {r["instance"] for r in e2e.records()} == {"after", "before"}
    status = await e2e.cli("status", "after")
    assert status.code == 0, status.stderr
