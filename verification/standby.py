"""A primary and a streaming standby, two private clusters built from Debian's binaries.

Failover drills and replica tests need what a team runs in production: a primary, a
standby made from it by ``pg_basebackup`` that streams its WAL, and the way the primary
waits (or not) for that standby before it acknowledges a commit. This module builds
that pair from two ``EmbeddedPostgres`` clusters under one root directory:

- the primary (``wal_level=replica``, PostgreSQL's default) with a physical
  replication slot, so it keeps every WAL segment until the standby has it;
- the standby, ``pg_basebackup -R`` of the primary, started and awaited until it
  streams (``pg_stat_replication`` on the primary shows it);
- ``synchronous=True`` sets ``synchronous_standby_names`` on the primary *after* the
  copy (a promoted standby must not inherit it, or it would wait for a standby of its
  own that does not exist): a COMMIT is then acknowledged only once the standby has
  flushed it, so nothing acknowledged is lost when the standby takes over.
  ``synchronous=False`` leaves it empty: the primary acknowledges at once, and what
  the standby has not yet received is lost with the primary;
- ``apply_delay`` (``recovery_min_apply_delay``) makes the standby replay late,
  a lagging replica that still receives every commit at once.

``multi_host_dsn`` names both servers with ``target_session_attrs=read-write``: libpq
connects to whichever of them is the primary, so a client holding it follows a
promotion without being told. Use ``StandbyPair.start(root, synchronous=...)``, then
``stop()`` in a ``finally:`` (or ``with``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Self

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from engine.store.embedded import EmbeddedPostgres, EmbeddedPostgresError

SLOT = "wayline_standby"
"""The primary's physical replication slot for the standby."""
STREAMING_SECONDS = 30.0
"""How long the standby may take to stream (and, synchronous, to be the sync standby)."""
PROMOTED_SECONDS = 30.0
"""How long a promoted standby may take to accept writes."""
POLL_SECONDS = 0.05
REPLAYING = """
SELECT count(*) WHERE pg_last_wal_replay_lsn() < pg_last_wal_receive_lsn()
  AND NOT EXISTS (SELECT 1 FROM pg_stat_activity
                  WHERE backend_type = 'startup' AND wait_event = 'RecoveryRetrieveRetryInterval')
"""
"""1 while a standby has received WAL it has not replayed yet (a NULL, when it never
streamed, counts as nothing to replay). Received WAL can end inside a record, when the
WAL receiver stopped (shipping paused, the primary killed) in the middle of sending it:
that record's end never comes, so the replay position stays behind for good, and the
standby's startup process waits for more WAL (``RecoveryRetrieveRetryInterval``) with
every whole record replayed. Then there is nothing more to replay either."""
SYNC_STATE = "sync"
"""``pg_stat_replication.sync_state`` of a standby the primary waits for."""


class StandbyError(RuntimeError):
    """The pair could not be built, did not stream, or the standby did not take over."""


@dataclass
class StandbyPair:
    """A running primary and its streaming standby (see the module's docstring)."""

    primary: EmbeddedPostgres
    standby: EmbeddedPostgres
    synchronous: bool

    @classmethod
    def start(cls, root: Path, synchronous: bool = True, apply_delay: float = 0.0) -> Self:
        """Build and start both clusters under ``root`` and wait until the standby streams.

        ``root`` gets ``primary/`` and ``standby/``; both must be new. ``apply_delay``
        seconds delay the standby's replay (``recovery_min_apply_delay``), not its receipt.
        """
        root = Path(root)
        primary = EmbeddedPostgres(root / "primary")
        primary.start()
        pair = cls(primary, EmbeddedPostgres(root / "standby"), synchronous)
        try:
            _execute(primary.dsn, "SELECT pg_create_physical_replication_slot(%s)", (SLOT,))
            pair.standby.clone(primary.dsn, SLOT)
            if apply_delay:
                _append_setting(
                    pair.standby, "recovery_min_apply_delay", f"{round(apply_delay * 1000)}ms"
                )
            pair.standby.start()
            pair.wait_streaming()
            if synchronous:
                _execute(primary.dsn, "ALTER SYSTEM SET synchronous_standby_names = '*'")
                _execute(primary.dsn, "SELECT pg_reload_conf()")
                pair.wait_streaming(SYNC_STATE)
        except BaseException:
            pair.stop()
            raise
        return pair

    @property
    def primary_dsn(self) -> str:
        return self.primary.dsn

    @property
    def standby_dsn(self) -> str:
        return self.standby.dsn

    @property
    def multi_host_dsn(self) -> str:
        """Both servers, primary first, in libpq's key=value form: connections go to
        whichever accepts writes (``target_session_attrs=read-write``)."""
        return multi_host(self.primary_dsn, self.standby_dsn)

    @property
    def multi_host_url(self) -> str:
        """The same as a URL: ``postgresql://h1:p1,h2:p2/db?target_session_attrs=...``."""
        hosts = ",".join(
            f"{part['host']}:{part['port']}"
            for part in map(conninfo_to_dict, (self.primary_dsn, self.standby_dsn))
        )
        return f"postgresql://postgres@{hosts}/postgres?target_session_attrs=read-write"

    def wait_streaming(self, state: str = "") -> None:
        """Until the primary shows the standby streaming (in ``state``, when given)."""
        query = "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'"
        params: tuple[str, ...] = ()
        if state:
            query, params = f"{query} AND sync_state = %s", (state,)
        _until(
            lambda: _scalar(self.primary_dsn, query, params) > 0,
            STREAMING_SECONDS,
            f"the standby did not stream{' as ' + state if state else ''} (logs "
            f"{self.primary.log_path}, {self.standby.log_path})",
        )

    def wait_caught_up(self) -> None:
        """Until the standby has replayed all the primary had written when called
        (with ``apply_delay``, that takes the delay)."""
        query = "SELECT count(*) FROM pg_stat_replication WHERE replay_lsn >= %s::pg_lsn"
        with psycopg.connect(self.primary_dsn, autocommit=True) as conn:
            written = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]
        _until(
            lambda: _scalar(self.primary_dsn, query, (written,)) > 0,
            STREAMING_SECONDS,
            f"the standby did not replay up to {written}",
        )

    def kill_primary(self) -> int:
        """SIGKILL the primary's postmaster (a crash, no shutdown checkpoint); its pid."""
        return self.primary.kill()

    def promote(self) -> int:
        """Promote the standby and wait until it accepts writes; the xid horizon: the
        first transaction id the standby had not seen. Ids at or past it that the old
        primary gave out never reached the standby; the promoted server gives them out
        again, so their status there says nothing about the old primary's transactions.
        """
        _until(  # the horizon is read once all the standby received is replayed
            lambda: _scalar(self.standby_dsn, REPLAYING) == 0,
            PROMOTED_SECONDS,
            "the standby did not replay what it had received",
        )
        horizon = _scalar(self.standby_dsn, "SELECT pg_snapshot_xmax(pg_current_snapshot())")
        self.standby.promote()
        _until(
            lambda: _scalar(self.standby_dsn, "SELECT count(*) WHERE NOT pg_is_in_recovery()") > 0,
            PROMOTED_SECONDS,
            f"the promoted standby did not accept writes (log {self.standby.log_path})",
        )
        return horizon

    def pause_shipping(self) -> None:
        """Stop the standby receiving WAL (an empty ``primary_conninfo``, reloaded): the
        primary goes on alone. Synchronous, its commits then wait; asynchronous, it
        acknowledges commits the standby will never have."""
        _execute(self.standby_dsn, "ALTER SYSTEM SET primary_conninfo = ''")
        _execute(self.standby_dsn, "SELECT pg_reload_conf()")
        _until(
            lambda: _scalar(self.standby_dsn, "SELECT count(*) FROM pg_stat_wal_receiver") == 0,
            STREAMING_SECONDS,
            "the standby's WAL receiver did not stop",
        )

    def stop(self) -> None:
        """Stop both clusters (whatever state they are in); their data dirs remain."""
        errors = []
        for server in (self.standby, self.primary):
            try:
                server.stop()
            except EmbeddedPostgresError as exc:
                errors.append(str(exc))
        if errors:
            raise StandbyError("; ".join(errors))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def multi_host(*dsns: str) -> str:
    """One conninfo naming every server of ``dsns`` (same user and database), which
    connects to the one that accepts writes."""
    parts = [conninfo_to_dict(dsn) for dsn in dsns]
    return make_conninfo(
        "",
        user=parts[0].get("user"),
        dbname=parts[0].get("dbname"),
        host=",".join(str(p["host"]) for p in parts),
        port=",".join(str(p["port"]) for p in parts),
        target_session_attrs="read-write",
    )


def _until(condition: Callable[[], bool], seconds: float, failure: str) -> None:
    """Poll ``condition`` until it holds; StandbyError saying ``failure`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise StandbyError(f"{failure} within {seconds:g} s")
        time.sleep(POLL_SECONDS)


def _append_setting(server: EmbeddedPostgres, name: str, value: str) -> None:
    """A setting for a cluster that is not running (``postgresql.auto.conf`` is read last)."""
    with (server.data_dir / "postgresql.auto.conf").open("a") as conf:
        conf.write(f"{name} = '{value}'\n")


def _execute(dsn: str, statement: str, params: tuple[str, ...] = ()) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(statement, params or None)


def _scalar(dsn: str, query: str, params: tuple[str, ...] = ()) -> int:
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=2) as conn:
            row = conn.execute(query, params or None).fetchone()
    except psycopg.OperationalError:
        return 0
    return int(row[0]) if row else 0
