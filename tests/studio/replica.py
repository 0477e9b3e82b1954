"""A studio whose read pages read a real streaming standby, and ways to make it lag.

The pair is ``verification.standby.StandbyPair`` (two private clusters, the standby a
``pg_basebackup`` of the primary). Lag is made deterministic by pausing the standby's
replay (``pg_wal_replay_pause``): it keeps receiving WAL but shows nothing new until
``thaw``, so a test sees exactly the stale state it arranged, with no timing.
Shared by the studio tests and the browser test of replica reads.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from engine.store.embedded import EmbeddedPostgresError, find_pg_bin
from engine.store.migrations import apply_migrations
from tests.studio.live import LiveStudio, serve_studio
from verification.standby import StandbyPair

CATCH_UP_SECONDS = 30.0
"""How long the standby may take to replay what the primary has flushed."""
POLL_SECONDS = 0.05
PRIMARY_POSITION = "SELECT pg_current_wal_flush_lsn()"
REPLAYED = "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn"
PAUSED = "SELECT pg_get_wal_replay_pause_state()"


def require_binaries() -> None:
    """Skip (naming what is missing) where the PostgreSQL server binaries are absent."""
    try:
        find_pg_bin()
    except EmbeddedPostgresError:
        pytest.skip("PostgreSQL server binaries (initdb, pg_basebackup) are not installed")


@contextmanager
def replica_studio(root: Path, **settings: Any) -> Iterator[tuple[StandbyPair, LiveStudio]]:
    """A primary and its standby, and a studio on the primary whose ``read_dsn`` is the
    standby (no worker: instances wait, so every state is the test's own doing)."""
    require_binaries()
    with StandbyPair.start(root, synchronous=False) as pair:
        schema = f"studio_{uuid.uuid4().hex[:12]}"
        apply_migrations(pair.primary_dsn, schema)
        catch_up(pair)
        with serve_studio(
            pair.primary_dsn, schema, read_dsn=pair.standby_dsn, **settings
        ) as studio:
            yield pair, studio


def _scalar(dsn: str, query: str, params: tuple[Any, ...] = ()) -> Any:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(query, params or None).fetchone()
    assert row is not None
    return row[0]


def catch_up(pair: StandbyPair) -> None:
    """Until the standby has replayed everything the primary had flushed on entry."""
    target = _scalar(pair.primary_dsn, PRIMARY_POSITION)
    deadline = time.monotonic() + CATCH_UP_SECONDS
    while not _scalar(pair.standby_dsn, REPLAYED, (target,)):
        assert time.monotonic() < deadline, f"the standby did not replay {target}"
        time.sleep(POLL_SECONDS)


@contextmanager
def frozen(pair: StandbyPair) -> Iterator[None]:
    """The standby caught up and then paused: it replays nothing until the block ends,
    then catches up again."""
    catch_up(pair)
    _scalar(pair.standby_dsn, "SELECT pg_wal_replay_pause()::text")
    deadline = time.monotonic() + CATCH_UP_SECONDS
    while _scalar(pair.standby_dsn, PAUSED) != "paused":
        assert time.monotonic() < deadline, "the standby's replay did not pause"
        time.sleep(POLL_SECONDS)
    try:
        yield
    finally:
        _scalar(pair.standby_dsn, "SELECT pg_wal_replay_resume()::text")
        catch_up(pair)
