"""Running a campaign: calibrate, run every drill in its own schema, check, collect.

Drills run concurrently (``profile.parallel`` at a time), except the ones that disturb
the whole server (restart, pause) and D7, which replays what the others produced: those
run alone, after the rest. A drill that needs a server the harness owns is *not run*
on a borrowed one. After each scenario (fault phase + quiet phase) the processes are
stopped, the schema's histories are captured into the campaign's replay corpus, and the
invariant checker runs; the schema is then dropped.

Calibration first runs the standard workload once without faults; its boundary counts
choose hit numbers the fault drills can rely on reaching.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from engine.store import catalog
from verification import capture, invariants, observations
from verification.drills.base import (
    Campaign,
    DrillEnv,
    DrillFailed,
    DrillNotRun,
    DrillResult,
    DrillSpec,
    DrillTimeout,
)
from verification.fault_plan import BoundaryReport
from verification.profiles import Profile
from verification.target import Target
from verification.workloads import Workload

log = logging.getLogger("wayline.drills")
Progress = Callable[[DrillResult, int, int], None]


@dataclass
class CampaignResult:
    campaign_id: str
    profile: Profile
    seed: int
    started_at: datetime
    finished_at: datetime
    wall_seconds: float
    target_owned: bool
    directory: Path
    results: list[DrillResult]
    calibration: Counter[str] = field(default_factory=Counter)
    baseline: dict[str, float] = field(default_factory=dict)
    mutant: str = ""


async def run_campaign(
    target: Target,
    specs: list[DrillSpec],
    profile: Profile,
    seed: int,
    directory: Path,
    progress: Progress | None = None,
    mutant: str = "",
    campaign_id: str = "",
    calibration: Counter[str] | None = None,
) -> CampaignResult:
    """Run ``specs`` against ``target``; every result, in catalogue order.

    ``calibration`` reuses the boundary counts of an earlier campaign (the self-test
    runs several campaigns of the same drills).
    """
    campaign_id = campaign_id or new_campaign_id()
    campaign = Campaign(campaign_id, target, directory / campaign_id, profile, mutant=mutant)
    campaign.directory.mkdir(parents=True, exist_ok=True)
    started, clock = datetime.now(UTC), time.monotonic()
    baseline: dict[str, float] = {}
    if calibration:
        campaign.calibration.update(calibration)
    elif any("boundary" in s.params for s in specs):
        baseline = await calibrate(campaign)
    results = await _run_all(campaign, specs, progress)
    order = {s.id: n for n, s in enumerate(specs)}
    results.sort(key=lambda r: order[r.spec_id])
    return CampaignResult(
        campaign_id,
        profile,
        seed,
        started,
        datetime.now(UTC),
        time.monotonic() - clock,
        target.owned,
        campaign.directory,
        results,
        campaign.calibration,
        baseline,
        mutant,
    )


def new_campaign_id() -> str:
    """Sortable and short enough to name schemas: ``c`` + UTC time + 4 hex digits."""
    return f"c{datetime.now(UTC):%Y%m%d%H%M%S}{uuid.uuid4().hex[:4]}"


async def _run_all(
    campaign: Campaign, specs: list[DrillSpec], progress: Progress | None
) -> list[DrillResult]:
    results: list[DrillResult] = []
    shared = [s for s in specs if not s.exclusive]
    alone = sorted((s for s in specs if s.exclusive), key=lambda s: s.family == "D7")
    gate = asyncio.Semaphore(campaign.profile.parallel)

    async def one(spec: DrillSpec) -> None:
        async with gate:
            result = await run_drill(spec, campaign)
        results.append(result)
        if progress is not None:
            progress(result, len(results), len(specs))

    # Every drill ends before this does, stopped ones too: a plain gather ends as soon
    # as one of them is cancelled, and the others' cleanup (their processes, their
    # schemas) would be cancelled again, half done, when the event loop closes.
    ended = await asyncio.gather(*(one(s) for s in shared), return_exceptions=True)
    if broke := next((e for e in ended if isinstance(e, BaseException)), None):
        raise broke
    for spec in alone:
        await one(spec)
    return results


async def calibrate(campaign: Campaign) -> dict[str, float]:
    """Run the standard workload without faults: boundary counts and a no-fault baseline."""
    spec = DrillSpec("calibration", "-", "no faults", 0, _calibration_scenario)
    env = await DrillEnv.open(spec, campaign, f"drill_{campaign.campaign_id}_cal")
    try:
        await spec.scenario(env)
        report = BoundaryReport.read(env.process_env.report)
        campaign.calibration.update(report.reached)
        return {"seconds": env.record.busy_seconds or 0.0, "instances": len(env.record.acked)}
    finally:
        await env.close()


async def _calibration_scenario(env: DrillEnv) -> None:
    planned = await env.start_workload(Workload("calibration"))
    for item in planned:
        await env.signal(item)
    env.worker("a")
    await env.quiesce()
    await env.stop_processes()


async def run_drill(spec: DrillSpec, campaign: Campaign) -> DrillResult:
    """One drill: scenario, checks, cleanup. Never raises for a drill's own failure."""
    if spec.servers is not None:
        return await _on_own_servers(spec, campaign)
    started = time.monotonic()
    if spec.owned_server and not campaign.target.owned:
        return _not_run(spec, "needs a PostgreSQL the harness owns (run without --dsn)")
    schema = f"drill_{campaign.campaign_id}_{hashlib.sha256(spec.id.encode()).hexdigest()[:10]}"
    try:
        env = await DrillEnv.open(spec, campaign, schema, manual_clock=spec.manual_clock)
    except Exception as exc:  # the drill never started: that is a failure, say why
        log.exception("drill %s could not be set up", spec.id)
        return _result(spec, "failed", started, [f"setup failed: {type(exc).__name__}: {exc}"])
    try:  # closed however the drill ends: stopped (cancelled) too, or its processes and
        # schema outlive it
        try:
            failures = await _scenario(env)
        except DrillNotRun as exc:
            return _not_run(spec, str(exc))
        try:
            await env.stop_processes()
            return await _check(env, not failures, failures, started)
        except Exception as exc:  # the checker could not run: the drill proved nothing
            _keep_traceback(env)
            return _result(spec, "failed", started, [*failures, f"check failed: {exc!r}"])
    finally:
        await _close(env)


async def _on_own_servers(spec: DrillSpec, campaign: Campaign) -> DrillResult:
    """A drill on the servers it builds: the same run with them as the campaign's target
    (its schema, processes and checks all on them); they are stopped afterwards."""
    assert spec.servers is not None
    started = time.monotonic()
    try:
        async with spec.servers(campaign.directory / spec.id / "servers") as target:
            own = replace(campaign, target=target)
            return await run_drill(replace(spec, servers=None), own)
    except DrillNotRun as exc:
        return _not_run(spec, str(exc))
    except Exception as exc:  # the servers could not be built or stopped: say why
        log.exception("drill %s could not build or stop its servers", spec.id)
        return _result(spec, "failed", started, [f"servers: {type(exc).__name__}: {exc}"])


async def _scenario(env: DrillEnv) -> list[str]:
    """Run the fault and quiet phases; their failures (a timeout, an error), if any."""
    try:
        await asyncio.wait_for(env.spec.scenario(env), env.campaign.profile.drill_seconds)
    except (DrillTimeout, TimeoutError) as exc:
        return [f"timeout: {exc or 'the drill exceeded its budget'}"]
    except DrillNotRun:
        raise
    except DrillFailed as exc:  # said for the user: no exception type before it
        return [str(exc)]
    except Exception as exc:
        _keep_traceback(env)
        return [f"error: {type(exc).__name__}: {exc}"]
    return []


def _keep_traceback(env: DrillEnv) -> None:
    (env.directory / "error.txt").write_text(traceback.format_exc())


async def _close(env: DrillEnv) -> None:
    """Clean up; a failure here is logged, never allowed to end the campaign."""
    try:
        await env.close()
    except Exception:
        log.exception("drill %s could not be cleaned up (schema %s)", env.spec.id, env.schema)


async def _check(env: DrillEnv, quiet: bool, failures: list[str], started: float) -> DrillResult:
    histories = await capture.capture(env.store)
    capture.save(histories, env.campaign.corpus, env.spec.id)
    report = BoundaryReport.read(env.process_env.report)
    context = invariants.CheckContext(
        store=env.store,
        registry=await catalog.load_registry(env.store),
        acked=env.record.acked,
        quiet=quiet,
        db_clock=not env.clock_file,
        plan=env.record.plan,
        report=report,
        ambiguous=[c for p in env.proxies for c in p.ambiguous],
        observations=list(observations.read(env.process_env.observations)),
        histories=histories,
        strands=env.spec.strands,
        machines=env.record.machines,
        xid_horizon=env.record.extra.get("xid_horizon", 0),
        code=env.code,
    )
    findings = await invariants.check(context)
    for invariant, checked in env.record.checked_apart.items():
        findings.add(invariant, checked)  # its violations failed the drill already
    failures = failures + env.record.expectations + findings.violations
    result = _result(env.spec, "failed" if failures else "passed", started, failures)
    result.record = env.record
    result.checks = {k: (c.checked, c.violations) for k, c in findings.checks.items()}
    result.stats = findings.stats + env.record.stats
    result.reached = dict(report.reached)
    result.fired = report.fired
    result.artifacts = str(env.directory)
    return result


def _result(spec: DrillSpec, verdict: str, started: float, failures: list[str]) -> DrillResult:
    return DrillResult(
        spec.id,
        spec.family,
        spec.title,
        spec.seed,
        verdict,
        time.monotonic() - started,
        failures,
    )


def _not_run(spec: DrillSpec, why: str) -> DrillResult:
    return DrillResult(spec.id, spec.family, spec.title, spec.seed, "not_run", 0.0, [why])
