"""Running a campaign end to end: the function the CLI and the studio call.

``run_drills`` picks the target (the given PostgreSQL, or a private embedded cluster the
harness owns so that server drills can run), records the run in the store's schema as
it goes (``verification.runs``), builds the scorecard and returns it. The studio lists
and shows runs with ``verification.runs.list_runs`` and ``get_run``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import psycopg

from engine.store.embedded import EmbeddedPostgres
from engine.store.migrations import DEFAULT_SCHEMA, apply_migrations
from engine.store.store import Store
from verification import attribution, plan_drills, reports, runs, scorecard
from verification.drills.base import DrillResult, DrillSpec
from verification.drills.catalogue import catalogue, select
from verification.plan_drills import Drilled
from verification.profiles import PROFILES, Profile
from verification.runner import new_campaign_id, run_campaign
from verification.target import Target
from verification.threads import to_the_end

log = logging.getLogger("wayline.drills")
DrillProgress = Callable[[int, int, dict[str, Any]], None]
"""``progress(done, total, drill)``: ``drill`` is the scorecard entry of a finished drill."""
STOPPED = "stopped before it finished"
"""The error a run stopped on purpose is recorded with (its finished drills are kept)."""


@dataclass
class Outcome:
    run_id: str
    card: dict[str, Any]
    text: str
    recorded: bool

    @property
    def failed(self) -> int:
        return self.card["summary"]["failed"]

    def junit(self) -> str:
        return reports.junit(self.card)


@dataclass
class Recording:
    """What became of a run's record, for a caller that a stop leaves without an
    ``Outcome`` (``wayline drill run`` says it after Ctrl-C)."""

    kept: bool = False
    """The run's end (finished, stopped or failed) is stored in its schema, to stay."""
    why_not: str = "it was stopped before its record was made"
    """Why it is not kept, when it is not."""


def master_seed(seed: int | None) -> int:
    return seed if seed is not None else random.SystemRandom().randrange(1, 2**31)


async def run_drills(
    dsn: str | None,
    drills: list[str] | None = None,
    profile: str = "ci",
    seed: int | None = None,
    progress_callback: DrillProgress | None = None,
    *,
    schema: str = DEFAULT_SCHEMA,
    artifacts: Path | None = None,
    hit: int | None = None,
    team: str = "",
    workload: str = "",
    recording: Recording | None = None,
) -> Outcome:
    """Run the selected drills (all of ``profile`` when None) and record the run.

    ``dsn`` None means a private cluster the harness owns (server drills run);
    otherwise drills run in fresh schemas on that server and server drills are not run.
    ``workload`` (``flow``, ``machine`` or ``code``) keeps only that workload's drills.
    The run is recorded in ``schema`` (its migrations must include drill runs);
    ``recording`` learns whether it was.
    """
    chosen = PROFILES[profile]
    seed = master_seed(seed)
    specs = select(catalogue(chosen, seed, workload), drills or [])
    if hit is not None:
        specs = [_with_hit(s, hit) for s in specs]
    return await run_specs(
        dsn, specs, chosen, seed, progress_callback, schema=schema, artifacts=artifacts,
        requested=drills or [], team=team, recording=recording,
    )  # fmt: skip


async def run_plans(
    dsn: str | None,
    drilled: list[Drilled],
    seed: int | None = None,
    progress_callback: DrillProgress | None = None,
    *,
    schema: str = DEFAULT_SCHEMA,
    artifacts: Path | None = None,
    team: str = "",
    recording: Recording | None = None,
) -> Outcome:
    """Run drill plans (``verification.plan_drills``) as a recorded campaign (of
    ``team`` when the studio runs them)."""
    seed = master_seed(seed)
    specs = plan_drills.specs(drilled, seed)
    return await run_specs(
        dsn, specs, PROFILES["ci"], seed, progress_callback, schema=schema,
        artifacts=artifacts, requested=[s.id for s in specs], team=team, recording=recording,
        judge=lambda card: attribution.annotate(card, drilled),
    )  # fmt: skip


async def run_specs(
    dsn: str | None,
    specs: list[DrillSpec],
    chosen: Profile,
    seed: int,
    progress_callback: DrillProgress | None,
    *,
    schema: str,
    artifacts: Path | None,
    requested: list[str],
    team: str = "",
    recording: Recording | None = None,
    judge: Callable[[dict[str, Any]], None] | None = None,
) -> Outcome:
    """Run ``specs`` on ``dsn`` (a private cluster when None) and record the run
    (``recording`` says whether it was kept); ``judge`` adds its verdicts to the
    scorecard before it is recorded (a plan's, per pin).

    ``artifacts`` is made absolute here: the drill's processes run in the project's
    directory, and a relative ``--artifacts`` sent their boundary reports and stub
    files where the harness never looked (every drill timed out)."""
    directory = (artifacts or Path(tempfile.gettempdir()) / "wayline-drills").absolute()
    recording = recording or Recording()
    async with target_for(dsn) as target:
        recorder = await _recorder(target.dsn, schema, owned=target.owned)
        if recorder is None:
            recording.why_not = f"schema {schema} is not usable"
        elif target.owned:
            recording.why_not = "it ran on a private cluster, removed as the run ended"
        try:
            return await _recorded(
                target, recorder, specs, chosen, seed, directory, progress_callback,
                requested=requested, team=team, recording=recording,
                where=scorecard.server_options(dsn, schema), judge=judge,
            )  # fmt: skip
        finally:
            if recorder:
                await recorder.close()


async def _recorded(
    target: Target,
    recorder: Store | None,
    specs: list[DrillSpec],
    profile: Profile,
    seed: int,
    directory: Path,
    callback: DrillProgress | None,
    requested: list[str],
    team: str,
    recording: Recording,
    where: str,
    judge: Callable[[dict[str, Any]], None] | None,
) -> Outcome:
    """The campaign, recorded as it starts, as each drill ends, and when it ends;
    ``where`` names its server in the reproductions (``scorecard.server_options``)."""
    run_id = new_campaign_id()
    label = "owned cluster" if target.owned else "given server"
    try:
        if recorder:
            await runs.start_run(
                recorder, run_id, profile.name, seed, requested, label, len(specs), team
            )
        progress = _Progress(recorder, run_id, seed, profile.name, callback, where)
        result = await run_campaign(
            target, specs, profile, seed, directory, progress, campaign_id=run_id
        )
        await progress.flush()
        card = scorecard.build(result, await _server_version(target.dsn), where)
        if judge:
            judge(card)
        text = reports.text(card)
        if recorder:
            await runs.finish_run(recorder, run_id, card, text)
            recording.kept = not target.owned
    except BaseException as exc:
        if recorder:
            await _record_unfinished(recorder, run_id, exc, recording, target.owned)
        raise
    return Outcome(run_id, card, text, recorder is not None)


async def _record_unfinished(
    recorder: Store, run_id: str, exc: BaseException, recording: Recording, owned: bool
) -> None:
    """Record why the run did not finish; when that fails, warn naming the error's type
    (its text can carry the driver's, which can quote the server) and say so in
    ``recording``."""
    error, status = _why_unfinished(exc)
    try:
        await runs.fail_run(recorder, run_id, error, status)
    except Exception as failure:
        log.warning("the run is not recorded as %s (%s)", status, type(failure).__name__)
        recording.why_not = f"recording it as {status} failed ({type(failure).__name__})"
    else:
        recording.kept = not owned


def _why_unfinished(exc: BaseException) -> tuple[str, str]:
    """What a run that did not finish is recorded with, and its status: stopped (from
    the studio, or by Ctrl-C), or the campaign's own error."""
    if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt):
        return STOPPED, "stopped"
    return f"{type(exc).__name__}: {exc}", "error"


def _with_hit(spec: DrillSpec, hit: int) -> DrillSpec:
    if "boundary" not in spec.params:
        return spec
    return replace(spec, params={**spec.params, "hit": hit})


class _Progress:
    """Records each finished drill (in the background) and tells the caller."""

    def __init__(
        self,
        recorder: Store | None,
        run_id: str,
        seed: int,
        profile: str,
        callback: DrillProgress | None,
        where: str,
    ) -> None:
        self.recorder, self.run_id, self.seed, self.profile = recorder, run_id, seed, profile
        self.callback, self.where = callback, where
        self.pending: set[asyncio.Task[None]] = set()

    def __call__(self, result: DrillResult, done: int, total: int) -> None:
        entry = scorecard.drill_entry(result, self.seed, self.profile, self.where)
        if self.recorder is not None:
            task = asyncio.ensure_future(runs.add_result(self.recorder, self.run_id, entry))
            self.pending.add(task)
            task.add_done_callback(self.pending.discard)
        if self.callback is not None:
            self.callback(done, total, entry)

    async def flush(self) -> None:
        await asyncio.gather(*self.pending, return_exceptions=True)


@contextlib.asynccontextmanager
async def target_for(dsn: str | None) -> AsyncIterator[Target]:
    """The given server, or a private cluster in a temporary directory."""
    if dsn:
        yield Target(dsn)
        return
    directory = Path(tempfile.mkdtemp(prefix="wayline-drill-pg-"))
    server = EmbeddedPostgres(directory / "data")
    try:
        yield Target(await to_the_end(server.start), server)
    finally:
        await asyncio.to_thread(server.stop)
        shutil.rmtree(directory, ignore_errors=True)


async def _recorder(dsn: str, schema: str, owned: bool) -> Store | None:
    """Where the run is recorded; None (with a warning) when the schema cannot hold it."""
    if owned:
        await to_the_end(apply_migrations, dsn, schema)
    try:
        return await Store.open(dsn, schema)
    except Exception as exc:  # a schema behind, a server refusing: run, but unrecorded
        log.warning(
            "the run is not recorded: schema %s is not usable (%s)", schema, type(exc).__name__
        )
        return None


async def _server_version(dsn: str) -> str:
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        row = await (await conn.execute("SHOW server_version")).fetchone()
    return str(row[0]).split()[0] if row else "unknown"
