"""What one ``bench/run`` measured: its sizes and every section's figures.

The run (``bench.main``) fills a ``Results``, saves it as JSON and hands it to the
report (``bench.report``); ``bench/run --render`` reads it back (``bench.saved``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench import claims, histories, pgbench, w1
from bench.profile_summary import ProfileSummary


@dataclass(frozen=True)
class Sizes:
    """How big each workload is; FULL follows the issue, QUICK is for development."""

    instances: int
    runs: int
    configs: tuple[tuple[int, int], ...]
    latency_count: int
    latency_warmup: int
    recovery_instances: int
    claim_levels: tuple[int, ...]
    claim_samples: int
    history_steps: int
    list_instances: int
    read_samples: int
    pgbench_seconds: int


@dataclass
class Results:
    mode: str
    sizes: Sizes
    started_at: str
    machine: str = ""
    load_before: str = ""
    load_after: str = ""
    duration_seconds: float = 0.0
    versions: dict[str, str] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)
    head: str = ""
    dirty: list[str] = field(default_factory=list)
    code_digest: str = ""
    pgbench_before: list[pgbench.PgbenchRun] = field(default_factory=list)
    pgbench_after: list[pgbench.PgbenchRun] = field(default_factory=list)
    pgbench_idle: pgbench.PgbenchRun | None = None
    throughput: list[w1.Throughput] = field(default_factory=list)
    latency: dict[str, w1.Latency] = field(default_factory=dict)
    recovery: dict[str, w1.Recovery] = field(default_factory=dict)
    profile: dict[str, Any] = field(default_factory=dict)
    profile_seconds: float = 0.0
    profile_summary: ProfileSummary | None = None
    claims: list[claims.ClaimLevel] = field(default_factory=list)
    histories: histories.HistoryResults | None = None
    errors: dict[str, str] = field(default_factory=dict)
