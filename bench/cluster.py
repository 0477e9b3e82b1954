"""The private PostgreSQL 15 cluster one benchmark run owns, and what we read from it.

Every workload of a run shares one cluster, started here with initdb's defaults and
therefore default durability (``fsync`` and ``synchronous_commit`` on), so Wayline,
DBOS and pgbench are compared on the same disk and settings. Two settings are added and
neither changes what a commit costs: ``pg_stat_statements`` is preloaded (statements per
instance) and ``wal_keep_size`` keeps a run's WAL on disk until ``pg_waldump`` has counted
its commit records (the durable commits per instance).

A measurement window (``Meter``) reads, before and after: the WAL insert position, the
commit counters of ``pg_stat_database``, the CPU time of every server process (from
``/proc``; backends that exited are in the postmaster's children times), and
``pg_stat_statements``. Our own probe queries carry ``/* bench-probe */`` so they are
left out of the statement counts.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from engine.store.embedded import EmbeddedPostgres, find_pg_bin

PROBE = "/* bench-probe */"
"""Marks the benchmark's own queries, which statement counts must not include."""

EXTRA_SETTINGS = {
    "shared_preload_libraries": "pg_stat_statements",
    "wal_keep_size": "4GB",
}
"""Added to initdb's defaults; none changes durability or the cost of a commit."""

_WALDUMP_LINE = re.compile(
    r"^(?P<type>\S+)\s+(?P<n>\d+)\s+\(\s*[\d.]+\)\s+(?P<rec>\d+)\s+\(\s*[\d.]+\)"
    r"\s+(?P<fpi>\d+)\s+\(\s*[\d.]+\)\s+(?P<total>\d+)"
)


@dataclass
class Cluster:
    """A running private cluster: TCP DSN for clients, data dir for WAL and /proc reads."""

    server: EmbeddedPostgres
    dsn: str
    data_dir: Path
    bin_dir: Path
    port: int

    def url(self, driver: str = "postgresql") -> str:
        """A URL form of the DSN (DBOS takes SQLAlchemy URLs)."""
        return f"{driver}://postgres@127.0.0.1:{self.port}/postgres"

    def connect(self) -> psycopg.Connection:
        """An autocommit connection for probes and setup."""
        return psycopg.connect(self.dsn, autocommit=True)

    def postmaster_pid(self) -> int:
        return int((self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0])

    def stop(self) -> None:
        self.server.stop()


def start_cluster(data_dir: Path) -> Cluster:
    """A fresh cluster in ``data_dir`` (any previous one there is stopped and removed)."""
    if (data_dir / "postmaster.pid").exists():
        leftover = EmbeddedPostgres(data_dir)
        leftover.start()  # adopts a server a crashed run left behind, so it can be stopped
        leftover.stop()
    shutil.rmtree(data_dir, ignore_errors=True)
    server = EmbeddedPostgres(data_dir)
    dsn = server.start()
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name, value in EXTRA_SETTINGS.items():
            conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
    server.stop()
    dsn = server.start()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        port = int(conn.info.port)
    return Cluster(server, dsn, Path(data_dir), find_pg_bin(), port)


def settings(cluster: Cluster) -> dict[str, str]:
    """The settings that decide what a commit costs, as the server reports them."""
    names = (
        "server_version",
        "fsync",
        "synchronous_commit",
        "wal_sync_method",
        "full_page_writes",
        "shared_buffers",
        "max_wal_size",
        "checkpoint_timeout",
        "wal_buffers",
        "commit_delay",
        "max_connections",
        "shared_preload_libraries",
        "wal_keep_size",
    )
    with cluster.connect() as conn:
        rows = conn.execute(
            f"{PROBE} SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY(%s)",
            [list(names)],
        ).fetchall()
    found = dict(rows)
    return {name: found.get(name, "?") for name in names}


def server_cpu_seconds(postmaster_pid: int) -> float:
    """User + system CPU of the postmaster, its live children and its reaped children."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _proc_stat(int(entry))
        if fields is None:
            continue
        ppid, utime, stime, cutime, cstime = fields
        if int(entry) == postmaster_pid:
            total += utime + stime + cutime + cstime
        elif ppid == postmaster_pid:
            total += utime + stime
    return total / ticks


def machine_cpu() -> tuple[float, float]:
    """(busy, steal) CPU seconds of the whole machine since boot, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    ticks = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) / ticks, steal / ticks


def _proc_stat(pid: int) -> tuple[int, int, int, int, int] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = text.rsplit(")", 1)[1].split()
    return int(rest[1]), int(rest[11]), int(rest[12]), int(rest[13]), int(rest[14])


@dataclass
class Statement:
    query: str
    calls: int
    total_ms: float


@dataclass
class Window:
    """What the server did between ``Meter.begin`` and ``Meter.finish``."""

    wal_bytes: int = 0
    commit_records: int = 0
    """Transaction/COMMIT records in the WAL: durable commits (and Wayline's claims,
    whose commit is flushed by the holder's first one, ``engine.store.leases``)."""
    xact_commit: int = 0
    """pg_stat_database's commits, read-only transactions included."""
    server_cpu: float = 0.0
    statements: list[Statement] = field(default_factory=list)
    wal_by_rmgr: dict[str, int] = field(default_factory=dict)
    machine_busy: float = 0.0
    """CPU seconds the whole machine was busy (all processes, all cores)."""
    machine_steal: float = 0.0
    """CPU seconds the hypervisor took from this VM."""

    @property
    def statement_calls(self) -> int:
        return sum(s.calls for s in self.statements)


class Meter:
    """Measures one window on the cluster; ``mark_end`` at the moment the work is done."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.conn = cluster.connect()
        self._start: tuple[str, int, float] | None = None
        self._end_lsn = ""
        self._machine: tuple[float, float] = (0.0, 0.0)
        self._machine_end: tuple[float, float] | None = None

    def close(self) -> None:
        self.conn.close()

    def checkpoint(self) -> None:
        """So every window starts right after a checkpoint (same full-page-write state)."""
        self.conn.execute(f"{PROBE} CHECKPOINT")

    def begin(self) -> None:
        self.conn.execute(f"{PROBE} SELECT pg_stat_statements_reset()")
        self._start = (self._lsn(), self._commits(), self._cpu())
        self._machine = machine_cpu()
        self._machine_end = None

    def mark_end(self) -> None:
        """The WAL position when the work was observed done (later writes are not ours)."""
        self._end_lsn = self._lsn()
        self._machine_end = machine_cpu()

    def finish(self) -> Window:
        """Read the counters; call after the clients disconnected (their stats are flushed)."""
        assert self._start is not None, "begin() first"
        start_lsn, start_commits, start_cpu = self._start
        end_lsn = self._end_lsn or self._lsn()
        machine_end = self._machine_end or machine_cpu()
        # A small durable write makes sure the WAL up to end_lsn is flushed for pg_waldump.
        self.conn.execute(f"{PROBE} CREATE TABLE IF NOT EXISTS bench_flush (x int)")
        self.conn.execute(f"{PROBE} INSERT INTO bench_flush VALUES (1)")
        wal = self.conn.execute(
            f"{PROBE} SELECT pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn)::bigint", [end_lsn, start_lsn]
        ).fetchone()[0]
        records, by_rmgr = self._waldump(start_lsn, end_lsn)
        rows = self.conn.execute(
            f"{PROBE} SELECT query, calls, total_exec_time FROM pg_stat_statements "
            "WHERE query NOT LIKE %s ORDER BY calls DESC",
            ["%bench-probe%"],
        ).fetchall()
        return Window(
            wal_bytes=int(wal),
            commit_records=records,
            xact_commit=self._commits() - start_commits,
            server_cpu=self._cpu() - start_cpu,
            statements=[Statement(q, int(c), float(t)) for q, c, t in rows],
            wal_by_rmgr=by_rmgr,
            machine_busy=machine_end[0] - self._machine[0],
            machine_steal=machine_end[1] - self._machine[1],
        )

    def _lsn(self) -> str:
        return self.conn.execute(f"{PROBE} SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]

    def _commits(self) -> int:
        row = self.conn.execute(
            f"{PROBE} SELECT sum(xact_commit)::bigint FROM pg_stat_database"
        ).fetchone()
        return int(row[0])

    def _cpu(self) -> float:
        return server_cpu_seconds(self.cluster.postmaster_pid())

    def _segment_file(self, lsn: str) -> str:
        """The name of the WAL segment file that holds ``lsn``."""
        timeline, size, position = self.conn.execute(
            f"{PROBE} SELECT (SELECT timeline_id FROM pg_control_checkpoint()), "
            "(SELECT setting::bigint FROM pg_settings WHERE name = 'wal_segment_size'), "
            "pg_wal_lsn_diff(%s::pg_lsn, '0/0')::bigint",
            [lsn],
        ).fetchone()
        segment, per_id = int(position) // int(size), 0x1_0000_0000 // int(size)
        return f"{timeline:08X}{segment // per_id:08X}{segment % per_id:08X}"

    def _waldump(self, start: str, end: str) -> tuple[int, dict[str, int]]:
        """Commit records and WAL bytes per resource manager between two positions.

        The first and last segments are named: without them pg_waldump learns the
        segment size from whichever file of the directory it lists first, and a file the
        server has just created for later use is still all zeros (the run fails)."""
        result = subprocess.run(
            [
                str(self.cluster.bin_dir / "pg_waldump"),
                f"--path={self.cluster.data_dir / 'pg_wal'}",
                f"--start={start}",
                f"--end={end}",
                "--stats=record",
                self._segment_file(start),
                self._segment_file(end),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        commits, by_rmgr = 0, {}
        for line in result.stdout.splitlines():
            match = _WALDUMP_LINE.match(line.strip())
            if not match or match["type"] == "Total":
                continue
            if match["type"] == "Transaction/COMMIT":
                commits += int(match["n"])
            rmgr = match["type"].split("/", 1)[0]
            by_rmgr[rmgr] = by_rmgr.get(rmgr, 0) + int(match["total"])
        if not by_rmgr:
            raise RuntimeError(f"pg_waldump gave no statistics: {result.stderr.strip()[:300]}")
        return commits, by_rmgr
