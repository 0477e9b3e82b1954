"""What ``bench/run --history-scale`` measured (``bench.history_scale``,
``bench.removal``): saved as JSON, read back by ``bench.saved``, rendered by
``bench.history_report``."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from bench.ended_rows import Shape


@dataclass
class Sample:
    """One measured call, at one size: caller median and p99 (ms), server ms per call
    (``pg_stat_statements``; 0 where not measured)."""

    name: str
    calls: int
    median_ms: float
    p99_ms: float
    server_ms: float = 0.0


def sample(name: str, timings_ms: list[float]) -> Sample:
    """Median and p99 of ``timings_ms`` (nearest rank, as W2's); ValueError when empty."""
    if not timings_ms:
        raise ValueError(f"no timings for {name}")
    ordered = sorted(timings_ms)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * len(ordered) + 0.5) - 1)]
    return Sample(name, len(ordered), statistics.median(ordered), p99)


@dataclass
class Batch:
    """One retention batch: instances removed, ms per part, WAL of the removal."""

    instances: int
    select_ms: float
    export_ms: float
    remove_ms: float
    wal_bytes: int


@dataclass
class RemovalResults:
    shape: Shape
    batches: list[Batch] = field(default_factory=list)
    delete_ms: dict[str, float] = field(default_factory=dict)
    """Server ms of retention's DELETE of each table, all batches together."""
    vacuum_ms: float = 0.0
    vacuum_wal_bytes: int = 0
    copy_seconds: float = 0.0
    partitions: int = 0
    partition_rows: dict[str, int] = field(default_factory=dict)
    """Rows of the dropped month's partition, per table."""
    partition_bytes: int = 0
    detach_ms: dict[str, float] = field(default_factory=dict)
    drop_ms: dict[str, float] = field(default_factory=dict)
    drop_wal_bytes: int = 0
    reads: list[Sample] = field(default_factory=list)
    """``history_page`` of an ended instance, production table then partitioned copy."""
    claim_loop: list[Sample] = field(default_factory=list)
    """Claim latency of the loop, pooled by phase."""

    @property
    def removed(self) -> int:
        return sum(b.instances for b in self.batches)

    @property
    def wal_bytes(self) -> int:
        return sum(b.wal_bytes for b in self.batches)


@dataclass
class TableSize:
    name: str
    rows: int
    heap_bytes: int
    index_bytes: int
    indexes: dict[str, int] = field(default_factory=dict)


@dataclass
class ScaleResults:
    ended_events: int
    started_at: str = ""
    machine: str = ""
    load_before: str = ""
    load_after: str = ""
    head: str = ""
    server_version: str = ""
    duration_seconds: float = 0.0
    shape: Shape | None = None
    load_seconds: float = 0.0
    vacuum_seconds: float = 0.0
    before: list[Sample] = field(default_factory=list)
    after: list[Sample] = field(default_factory=list)
    sizes_before: list[TableSize] = field(default_factory=list)
    sizes_after: list[TableSize] = field(default_factory=list)
    removal: RemovalResults | None = None
    busy_before: float = 0.0
    busy_after: float = 0.0
    """How busy the machine's cores were (0 to 1) when each measurement began."""
    error: str = ""
