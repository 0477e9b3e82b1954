"""The scorecard: one report per campaign, as text, JSON and JUnit XML.

Sections follow the reference (reliability.md section 4): identity, workload, faults
per boundary and kind (with boundaries never reached), environment faults, ambiguity,
leases and fencing, recovery, invariants, replay, property tests, cost under fault and
the anchors. Every failed drill carries its seed and a one-line reproduction command.
The last line of the text is exactly ``drills: N passed, N failed`` (drills not run are
reported above it and counted in neither). The layout is stable so two campaigns can be
diffed.
"""

from __future__ import annotations

import os
import platform
import shlex
import statistics
import subprocess
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from engine.store.migrations import DEFAULT_SCHEMA
from engine.worker.faults import Action, Boundary
from verification.drills.base import DrillResult
from verification.findings import NAMES, NOT_EXERCISED
from verification.known_bugs import KNOWN_BUGS, classify
from verification.runner import CampaignResult

ROOT = Path(__file__).resolve().parent.parent
ACTIONS = tuple(Action)
SHORT = {
    "kill": "kill",
    "exit": "exit",
    "raise": "raise",
    "sever_before_commit": "sev_before",
    "sever_after_commit": "sev_after",
    "pause": "pause",
}
ANCHORS = (
    "FDB: ~10^4 sims/night | TigerBeetle: 1,000 cores, ~2 millennia sim/day | "
    "Jepsen: hundreds x ~1000 s",
    "DBOS: 2 commit fault points, 899 tests | Temporal: ExecuteAndTimeout + replay corpus",
)


def build(result: CampaignResult, postgres_version: str, where: str = "") -> dict[str, Any]:
    """The scorecard as a JSON-ready dict (``where``: ``server_options``)."""
    drills = [drill_entry(r, result.seed, result.profile.name, where) for r in result.results]
    totals = _totals(result.results)
    return {
        "identity": _identity(result, postgres_version),
        "drills": drills,
        "workload": _workload(totals, result.results),
        "faults": _faults(result.results),
        "environment": _sum(r.record.env_faults for r in result.results),
        "ambiguity": _ambiguity(totals),
        "leases": _leases(totals),
        "recovery": _recovery(result.results),
        "failover": _failover(result.results),
        "invariants": _invariants(result.results),
        "replay": _replay(totals),
        "property": _property(result.results),
        "cost": _cost(result),
        "known_bugs": _known(drills),
        "summary": {
            "passed": sum(d["verdict"] == "passed" for d in drills),
            "failed": sum(d["verdict"] == "failed" for d in drills),
            "not_run": sum(d["verdict"] == "not_run" for d in drills),
        },
    }


def _git_sha() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
    except OSError:
        return "unknown"
    return out.stdout.strip() or "unknown"


def _identity(result: CampaignResult, postgres_version: str) -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        engine = version("wayline")
    except PackageNotFoundError:
        engine = "unknown"
    return {
        "campaign": result.campaign_id,
        "git_sha": _git_sha(),
        "engine_version": engine,
        "postgres": postgres_version,
        "python": platform.python_version(),
        "cores": os.cpu_count(),
        "ram_gib": _ram_gib(),
        "profile": result.profile.name,
        "seed": f"0x{result.seed:X}",
        "target": "owned cluster" if result.target_owned else "given server",
        "mutant": result.mutant,
        "started_at": result.started_at.isoformat(),
        "finished_at": result.finished_at.isoformat(),
        "wall_seconds": round(result.wall_seconds, 1),
        "artifacts": str(result.directory),
    }


def _ram_gib() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024)
    except OSError:
        pass
    return 0


PASSWORD_NOT_SHOWN = "  # its password is not shown: give it in PGPASSWORD or ~/.pgpass"
"""Ends a reproduction whose ``--dsn`` had a password (a shell comment: the line still
runs as copied, and libpq reads the password from either)."""


def server_options(dsn: str | None, schema: str) -> str:
    """How a reproduction names the server its campaign ran on: ``--dsn`` (without its
    password, ``PASSWORD_NOT_SHOWN``) and ``--schema`` unless the default; '' for a
    private cluster (``dsn`` None), which the reproduction starts again. Without them
    the line ran on a private cluster, not on the server that failed the drill."""
    if not dsn:
        return ""
    params = conninfo_to_dict(dsn)
    hidden = params.pop("password", None) is not None
    options = f" --dsn {shlex.quote(make_conninfo('', **params) if hidden else dsn)}"
    if schema != DEFAULT_SCHEMA:
        options += f" --schema {shlex.quote(schema)}"
    return options + (PASSWORD_NOT_SHOWN if hidden else "")


def reproduce(result: DrillResult, seed: int, profile: str, where: str = "") -> str:
    """One command that reruns exactly this drill on the same server (``where``:
    ``server_options``), with the hit its fault fired at, or was planned at when it never
    fired (a rerun would choose its hit from a calibration that can differ); a drill
    plan's drill names the plan it wrote (``verification.plan_drills``)."""
    if result.record.extra.get("reproduce"):
        return f"{result.record.extra['reproduce']}{where}"
    faults = result.fired or result.record.plan
    hit = f" --hit {faults[0].hit}" if faults else ""
    drill = f"--drill {result.spec_id} --seed 0x{seed:X} --profile {profile}{hit}"
    return f"wayline drill run {drill}{where}"


def drill_entry(result: DrillResult, seed: int, profile: str, where: str = "") -> dict[str, Any]:
    """A drill as the scorecard (and the drill_results table) shows it."""
    failed = result.verdict == "failed"
    return {
        "id": result.spec_id,
        "family": result.family,
        "title": result.title,
        "seed": f"0x{result.seed:08X}",
        "verdict": result.verdict,
        "seconds": round(result.seconds, 2),
        "failures": result.failures,
        "reproduce": reproduce(result, seed, profile, where) if failed else "",
        "known_bug": classify(result.failures) if failed else "",
        "artifacts": result.artifacts,
        "extra": {k: v for k, v in result.record.extra.items() if _plain(v)},
        "invariants": {k: [n, len(v)] for k, (n, v) in result.checks.items() if n},
    }


def _plain(value: Any) -> bool:
    return isinstance(value, (int, float, str, list, dict, bool))


def _sum(counters: Iterable[Counter[str]]) -> dict[str, int]:
    total: Counter[str] = Counter()
    for counter in counters:
        total.update(counter)
    return dict(sorted(total.items()))


def _totals(results: list[DrillResult]) -> Counter[str]:
    total: Counter[str] = Counter()
    for result in results:
        total.update(result.stats)
    return total


def _workload(totals: Counter[str], results: list[DrillResult]) -> dict[str, int]:
    keys = (
        "started", "completed", "continued_as_new", "failed", "cancelled", "dead_lettered",
        "checkpoints",
        "signals_sent", "signals_accepted", "signals_redelivered", "events", "effect_calls",
        "effects_applied", "effect_calls_unseen", "code_bodies_entered", "work_items",
        "instances", "offers_taken", "offers_lost",
    )  # fmt: skip
    workload = {k: totals.get(k, 0) for k in keys}
    workload["acknowledged"] = sum(len(r.record.acked) for r in results)
    workload["signals_deduplicated"] = max(
        0, workload["signals_sent"] - workload["signals_accepted"]
    )
    return workload


def _faults(results: list[DrillResult]) -> dict[str, Any]:
    planned: Counter[tuple[str, str]] = Counter()
    fired: Counter[tuple[str, str]] = Counter()
    reached_runs: Counter[str] = Counter()
    for result in results:
        for fault in result.record.plan:
            planned[(fault.boundary.value, fault.action.value)] += 1
        for fault in result.fired:
            fired[(fault.boundary.value, fault.action.value)] += 1
        for boundary, hits in result.reached.items():
            reached_runs[boundary] += hits > 0
    table = {
        b.value: {
            a.value: {"planned": planned[(b.value, a.value)], "fired": fired[(b.value, a.value)]}
            for a in ACTIONS
        }
        for b in Boundary
    }
    never = [f"{b}/{a}" for (b, a), n in planned.items() if n and fired[(b, a)] < n]
    return {"per_boundary": table, "reached_runs": dict(reached_runs), "never_reached": never}


def _ambiguity(totals: Counter[str]) -> dict[str, int]:
    return {
        "ambiguous_commits": sum(
            totals.get(f"ambiguous_{t}", 0) for t in ("committed", "aborted", "unknown")
        ),
        "committed": totals.get("ambiguous_committed", 0),
        "aborted": totals.get("ambiguous_aborted", 0),
        "unknown": totals.get("ambiguous_unknown", 0),
        "engine_settled_committed": totals.get("settled_committed", 0),
        "engine_settled_aborted": totals.get("settled_aborted", 0),
        "engine_settled_conflicting": totals.get("settled_conflicting", 0),
        "engine_left_unknown": totals.get("settled_unknown", 0),
        "engine_settled_by_session": totals.get("settled_by_session", 0),
        "resolved_later_committed": totals.get("resolved_later_committed", 0),
        "resolved_later_aborted": totals.get("resolved_later_aborted", 0),
    }


def _leases(totals: Counter[str]) -> dict[str, int]:
    return {
        "claims": totals.get("claims", 0),
        "takeovers": totals.get("takeovers", 0),
        "stale_writes_attempted": totals.get("stale_attempted", 0),
        "stale_writes_rejected": totals.get("stale_rejected", 0),
        "stale_writes_accepted": totals.get("stale_accepted", 0),
        "racing_claims": totals.get("rescue_claims", 0),
    }


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


def _recovery(results: list[DrillResult]) -> dict[str, Any]:
    times = [t for r in results for t in r.record.recovery_seconds]
    per_class: dict[str, list[float]] = {}
    for result in results:
        if result.record.fault_class:
            per_class.setdefault(result.record.fault_class, []).extend(
                result.record.recovery_seconds
            )
    stranded = sum(len(r.checks.get("I1", (0, []))[1]) for r in results)
    return {
        "faults": len(times),
        "p50": _percentile(times, 0.5),
        "p95": _percentile(times, 0.95),
        "max": round(max(times), 2) if times else 0.0,
        "per_class": {k: _percentile(v, 0.5) for k, v in sorted(per_class.items())},
        "stranded_after_quiet": stranded,
        "recovery_sweeps": sum(
            r.stats.get("recovery_sweeps", 0) + r.reached.get("in_recovery", 0) for r in results
        ),
    }


def _failover(results: list[DrillResult]) -> dict[str, Any]:
    """The failover drills (F1): how soon work resumed on the promoted standby, how many
    COMMITs were in flight when the primary died (their answers lost) and how many of
    them the engine settled (the others, claims and heartbeats, are retried as unknown),
    and what an asynchronous standby lost after acknowledging it (a finding about the
    setting, not an engine failure)."""
    extras = [r.record.extra for r in results if r.family == "F1"]
    resumed = [e["time_to_resume_seconds"] for e in extras if "time_to_resume_seconds" in e]
    return {
        "drills": len(extras),
        "time_to_resume_max": round(max(resumed), 2) if resumed else None,
        "commits_in_flight": sum(e.get("commits_in_flight", 0) for e in extras),
        "ambiguous_commits": sum(e.get("ambiguous_commits", 0) for e in extras),
        "acknowledged_lost": sum(e.get("acknowledged_lost", 0) for e in extras),
        "findings": [e["finding"] for e in extras if "finding" in e],
    }


def _invariants(results: list[DrillResult]) -> dict[str, Any]:
    """Per invariant, what the campaign's drills checked and broke; ``not_exercised``
    says why one that checked nothing and found nothing proved nothing ('' otherwise)."""
    out = {}
    for key, name in NAMES.items():
        checked = sum(r.checks.get(key, (0, []))[0] for r in results)
        broken = [(r, v) for r in results for v in r.checks.get(key, (0, []))[1]]
        out[key] = {
            "name": name,
            "checked": checked,
            "violations": len(broken),
            "first": _first(*broken[0]) if broken else None,
            "not_exercised": NOT_EXERCISED[key] if not (checked or broken) else "",
        }
    return out


def _first(result: DrillResult, what: str) -> dict[str, str]:
    return {
        "drill": result.spec_id,
        "seed": f"0x{result.seed:08X}",
        "what": what,
        "artifacts": result.artifacts,
    }


def _replay(totals: Counter[str]) -> dict[str, Any]:
    injected = totals.get("mutants_injected", 0)
    detected = totals.get("mutants_detected", 0)
    return {
        "histories": totals.get("histories", 0) + totals.get("corpus_histories", 0),
        "events_replayed": totals.get("events_replayed", 0) + totals.get("corpus_events", 0),
        "clean_nondeterminism": totals.get("clean_nondeterminism", 0),
        "snapshot_paths_checked": totals.get("snapshot_paths_checked", 0),
        "mutants_injected": injected,
        "mutants_detected": detected,
        "kill_rate": round(100 * detected / injected, 1) if injected else None,
    }


def _property(results: list[DrillResult]) -> dict[str, Any]:
    d9 = [r for r in results if r.family == "D9"]
    return {
        "examples": sum(r.stats.get("examples", 0) for r in d9),
        "steps": sum(r.stats.get("steps", 0) for r in d9),
        "shrinks": "on" if any(r.record.extra.get("shrinking") for r in d9) else "off",
        "failing_blobs": [b for r in d9 for b in r.record.extra.get("failing_blobs", [])],
    }


def _cost(result: CampaignResult) -> dict[str, Any]:
    """Instances per second of workload wall time, with faults and without (calibration)."""
    faulted = [
        r for r in result.results
        if r.verdict == "passed" and r.record.recovery_seconds and r.record.busy_seconds
    ]  # fmt: skip
    rates = [len(r.record.acked) / r.record.busy_seconds for r in faulted]
    base = result.baseline
    return {
        "instances_per_second_under_fault": round(statistics.median(rates), 2) if rates else None,
        "instances_per_second_no_fault": (
            round(base["instances"] / base["seconds"], 2) if base.get("seconds") else None
        ),
    }


def _known(drills: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for bug in KNOWN_BUGS:
        hit = [d["id"] for d in drills if d["known_bug"] == bug.bug_id]
        if hit:
            out.append(
                {
                    "id": bug.bug_id,
                    "title": bug.title,
                    "where": bug.where,
                    "detail": bug.detail,
                    "drills": hit,
                }
            )
    return out
