"""The report of ``bench/run --history-scale``: its section of ``bench/RESULTS.md``.

The section is rendered from the saved results and spliced into ``bench/RESULTS.md``
under ``HEADING``; a full run, which rewrites that file, keeps the section from the
file it replaces (``splice(new, section_of(old))``), so neither run loses the other's
figures.
"""

from __future__ import annotations

import statistics

from bench.scale_results import Sample, ScaleResults, TableSize, sample
from bench.tables import table

HEADING = "## Bounded history: W2 and W4 at 10^7 ended history rows, and removal (issue 25)"
MIB = 1024 * 1024
DASH = "\u2013"  # an en dash, for empty cells


def change(before: float, after: float) -> str:
    """``after`` relative to ``before``, as a signed percentage (a dash when before is 0)."""
    if before <= 0:
        return DASH
    return f"{100 * (after - before) / before:+.0f} %"


def side_by_side(before: list[Sample], after: list[Sample]) -> list[str]:
    """A table row per call measured both times, in ``before``'s order."""
    later = {s.name: s for s in after}
    header = [
        "call",
        "calls",
        "before median ms",
        "before p99 ms",
        "after median ms",
        "after p99 ms",
        "median change",
        "server ms before",
        "server ms after",
    ]
    rows = []
    for b in before:
        a = later.get(b.name)
        if a is None:
            continue
        rows.append(
            [
                b.name,
                str(b.calls),
                f"{b.median_ms:.2f}",
                f"{b.p99_ms:.2f}",
                f"{a.median_ms:.2f}",
                f"{a.p99_ms:.2f}",
                change(b.median_ms, a.median_ms),
                f"{b.server_ms:.3f}",
                f"{a.server_ms:.3f}",
            ]
        )
    return table(header, rows)


def size_table(before: list[TableSize], after: list[TableSize]) -> list[str]:
    """Rows, heap and index MiB per table, before and after."""
    earlier = {t.name: t for t in before}
    header = [
        "table",
        "rows before",
        "rows after",
        "heap MiB after",
        "indexes MiB after",
        "largest index after",
    ]
    rows = []
    for t in after:
        b = earlier.get(t.name)
        largest = max(t.indexes.items(), key=lambda item: item[1], default=(DASH, 0))
        rows.append(
            [
                t.name,
                f"{b.rows if b else 0:,}",
                f"{t.rows:,}",
                f"{t.heap_bytes / MIB:,.0f}",
                f"{t.index_bytes / MIB:,.0f}",
                f"{largest[0]} {largest[1] / MIB:,.0f} MiB",
            ]
        )
    return table(header, rows)


def _latency_rows(samples: list[Sample]) -> list[str]:
    return table(
        ["phase", "claims", "median ms", "p99 ms"],
        ([s.name, str(s.calls), f"{s.median_ms:.2f}", f"{s.p99_ms:.2f}"] for s in samples),
    )


def _removal(r: ScaleResults) -> list[str]:
    m = r.removal
    if m is None:
        return ["*Removal was not measured.*"]
    batches = m.batches
    if not batches:
        return ["*Retention found nothing to remove.*"]
    removed = m.removed
    per = m.shape
    remove_ms = [b.remove_ms for b in batches]
    export_ms = [b.export_ms for b in batches]
    find_ms = [b.select_ms for b in batches]
    wal = m.wal_bytes
    drop_ms = sum(m.detach_ms.values()) + sum(m.drop_ms.values())
    lines = [
        f"The oldest month: retention removed {removed:,} ended instances "
        f"({removed * per.events_per_instance:,} history, {removed * per.ledger_per_instance:,} "
        f"ledger and {removed * per.work_per_instance:,} work rows) in {len(batches)} batches; "
        f"the partitioned copy ({m.partitions} monthly partitions of history and ledger, built "
        f"in {m.copy_seconds:.0f} s) held the same month in partitions of "
        f"{m.partition_rows.get('history', 0):,} history and "
        f"{m.partition_rows.get('transitions', 0):,} ledger rows "
        f"({m.partition_bytes / MIB:,.0f} MiB with their indexes).",
        "",
        "| removal of one month | time | WAL |",
        "|---|---|---|",
        f"| retention, delete per batch of {max(b.instances for b in batches)} (median / p99) "
        f"| {statistics.median(remove_ms):,.0f} / {sample('', remove_ms).p99_ms:,.0f} ms "
        f"| {wal / len(batches) / MIB:,.1f} MiB per batch |",
        f"| retention, finding a batch (median / max) "
        f"| {statistics.median(find_ms):,.0f} / {max(find_ms):,.0f} ms | {DASH} |",
        f"| retention, export per batch (median; the same with partitions) "
        f"| {statistics.median(export_ms):,.0f} ms | {DASH} |",
        f"| retention, deletes of the month in all | {sum(remove_ms) / 1000:,.1f} s "
        f"| {wal / MIB:,.0f} MiB ({wal / max(removed, 1) / 1024:,.1f} KiB per instance) |",
        f"| retention, exports of the month in all | {sum(export_ms) / 1000:,.1f} s | {DASH} |",
        f"| of the deletes, server time of history + ledger / of all seven tables "
        f"| {(m.delete_ms.get('history', 0) + m.delete_ms.get('transitions', 0)) / 1000:,.1f} / "
        f"{sum(m.delete_ms.values()) / 1000:,.1f} s | {DASH} |",
        f"| VACUUM of the four tables after the deletes | {m.vacuum_ms / 1000:,.1f} s "
        f"| {m.vacuum_wal_bytes / MIB:,.0f} MiB |",
        f"| partitions: DETACH CONCURRENTLY + DROP, history and ledger "
        f"| {drop_ms:,.0f} ms | {m.drop_wal_bytes / 1024:,.0f} KiB |",
        "",
        "A worker's claim of one item (every 20 ms, from another process) while that ran:",
        "",
        *_latency_rows(m.claim_loop),
        "",
        "What partitioning costs on the read and commit paths: the engine reads history by "
        "instance id and every commit looks its transition id up in the ledger; neither names "
        "a partition, so each probes every partition's index:",
        "",
        *table(
            ["call", "calls", "median ms", "p99 ms", "server ms"],
            (
                [
                    s.name,
                    str(s.calls),
                    f"{s.median_ms:.2f}",
                    f"{s.p99_ms:.2f}",
                    f"{s.server_ms:.3f}",
                ]
                for s in m.reads
            ),
        ),
    ]
    return lines


def render(r: ScaleResults, decision: str = "") -> str:
    """The section, from its heading to its last line."""
    shape = r.shape
    if shape is None:
        return f"{HEADING}\n\n*Not measured.*\n"
    lines = [
        HEADING,
        "",
        f"Written by `bench/run --history-scale` on {r.started_at} in "
        f"{r.duration_seconds / 60:.1f} minutes. {r.machine}. Load average {r.load_before} "
        f"before, {r.load_after} after. Engine commit `{r.head}`; PostgreSQL "
        f"{r.server_version}, a private cluster with initdb defaults (shared_buffers 128MB).",
        "",
        f"Ended instances added: {shape.instances:,} copies of one engine-committed instance "
        f"of {shape.events_per_instance} events ({shape.events:,} history, {shape.ledger:,} "
        f"ledger and {shape.work:,} completed work rows), created over 12 months ending a "
        f"month ago (`bench/ended_rows.py`), in {r.load_seconds:,.0f} s, then "
        f"`VACUUM ANALYZE` ({r.vacuum_seconds:.0f} s). Both measurements run in the same schema "
        "with the 10,001-event instance, 100,000 running instances and 10,000 due work rows "
        "(topped up before each series of claims); 'ended' is one 32-event ended instance. "
        "Caller times are wall time in Python; server ms is PostgreSQL's execution time per "
        "call (`pg_stat_statements`). Before each measurement the run waited (at most 20 s) "
        f"for a quiet machine: its cores were {100 * r.busy_before:.0f} % busy before, "
        f"{100 * r.busy_after:.0f} % after.",
        "",
        *side_by_side(r.before, r.after),
        "",
        *size_table(r.sizes_before, r.sizes_after),
        "",
        *_removal(r),
    ]
    if r.error:
        lines += ["", f"**Failed:** {r.error}"]
    if decision:
        lines += ["", decision]
    return "\n".join(lines).rstrip() + "\n"


def section_of(document: str) -> str:
    """The section under ``HEADING`` in ``document`` (to the next ``## `` heading), or ''."""
    start = document.find(HEADING + "\n")
    if start < 0:
        return ""
    end = document.find("\n## ", start + len(HEADING))
    return document[start:] if end < 0 else document[start : end + 1]


def splice(document: str, section: str) -> str:
    """``document`` with its section under ``HEADING`` replaced by ``section`` (appended
    when it has none; unchanged when ``section`` is empty)."""
    if not section:
        return document
    section = section.rstrip("\n") + "\n"
    old = section_of(document)
    if old:
        return document.replace(old, section + ("\n" if old.endswith("\n\n") else ""), 1)
    return document.rstrip("\n") + "\n\n" + section


DECISION = """**What the run of 2026-12-03 19:41 UTC says (issue 25).**

- *Studio reads and claims are unchanged* by 10^7 history rows of ended instances: every
  instance-page and list read, and both claims, stayed within their noise (a 1-item claim
  0.20 -> 0.21 ms on the server, a 16-item claim 0.57 -> 0.70 ms). They read by instance
  id, or by indexes of running instances and due work. The ended list's first page is
  slower only because it has 100 rows to show instead of 2.
- *Claims needed one fix to get there.* The first run at this size (19:06 UTC, before the
  fix) measured the 16-item claim at 32.6 ms on the server: same plan, but the bigger
  tables raised its estimated cost past PostgreSQL's `jit_above_cost` (100,000; JIT is on
  by default in 15), so the server JIT-compiled it on every execution. Engine sessions now
  set `jit=off` (`engine/store/store.py`), which outranks a role's or a database's setting.
- *Retention's batches no longer grow with the tables.* Finding a batch scanned all of
  work and history (about 1 s per batch at this size in the first run); it now looks each
  candidate instance up: 10 ms per batch here.
- *Removal: partitioning does not pay at this size, so it is not done.* Retention removed
  a month (25,685 instances, 0.8 M history and 0.5 M ledger rows) in 52 batches: 19 s
  exporting (the same with partitions), 2.9 s deleting, of whose 2.3 s of server time
  history and the ledger took 0.6 s (work most of the rest: a foreign-key check per
  deleted row). The WAL was 345 MiB for the deletes (13.7 KiB per instance) and 157 MiB
  for the VACUUM after them (2.2 s). Dropping the same month's partitions of a
  partitioned copy took 0.16 s and 0.3 MiB of WAL. So partitions would save about 0.6 s
  of server time and most of 0.5 GB of WAL per month. In exchange, every history read and
  every commit's ledger lookup would probe each partition's index: with 12 partitions a
  history page took 0.034 ms on the server instead of 0.021, a ledger lookup 0.012 to
  0.014 ms instead of 0.002, growing with the months kept. It would also put a partition
  key in the primary keys of history and the ledger, written by every commit, and need
  either partitions per team (keeps differ by team) or drops that wait until every
  instance of the month is expired and free of running children. A worker's claim loop
  alongside moved a little while the deletes ran (median 4.5 ms, p99 12.9, against 3.0 and
  5.9 idle). Revisit when deleting history and the ledger becomes most of retention's
  cost or its WAL matters (replicas, backups), e.g. well past 10^8 rows.
"""

"""What the figures decided (issue 25: partition history and ledger only if it pays)."""
