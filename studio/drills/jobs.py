"""Drill campaigns started from the studio, running in the background.

A campaign spawns worker processes, proxies and schemas for minutes, so it runs on
its own thread with its own event loop: the studio's loop keeps answering pages while
drills crash workers on purpose. ``verification.campaigns.run_drills`` does the work
against the studio's PostgreSQL in throwaway drill schemas (never the studio's own
instances) and records the run in the studio's schema as it goes; the job here only
remembers what the page needs to show live (each drill as it finishes) until the
recorded run takes over. One campaign runs at a time per studio: drills are meant to
load the machine, and two at once would measure each other.
"""

from __future__ import annotations

import asyncio
import logging
import random
import tempfile
import threading
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine import Store
from studio.errors import Conflict, Invalid, NotFound
from studio.settings import StudioSettings

if TYPE_CHECKING:
    from verification.campaigns import DrillProgress, Outcome
    from verification.plan_drills import Drilled

log = logging.getLogger("wayline.studio")
KEEP_JOBS = 50
STOP_WAIT_SECONDS = 30.0
MAX_DRILL_NAME = 100
"""The longest drill id or family a start takes (the catalogue's are under 60)."""
BUSY = "a drill is running in this studio (one runs at a time); try again later"
"""Why a start is refused while a job runs (plan runs and campaigns share the one slot),
whichever team's it is: the refusal says no more than that, never what runs or whose,
since another team's drills are none of the caller's business. The Drills and plans
pages link a job of the caller's own team beside it."""


@dataclass
class DrillJob:
    """One campaign started here, as its page shows it while it runs."""

    job_id: str
    team: str
    actor: str
    profile: str
    drills: list[str]
    seed: int
    total: int
    started_at: datetime
    finished: list[dict[str, Any]] = field(default_factory=list)
    status: str = "running"
    """running, finished, stopped or error."""
    run_id: str = ""
    error: str = ""
    finished_at: datetime | None = None
    plan: Any = None
    """The saved drill plan this job runs (``studio.plans``); None for a campaign."""
    stopped_by: str = ""
    """Who asked for the job to stop (``DrillJobs.stop``); its status is ``stopped`` once
    its drills have cleaned up."""

    @property
    def done(self) -> int:
        return len(self.finished)

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def failed(self) -> int:
        return sum(d["verdict"] == "failed" for d in self.finished)

    @property
    def title(self) -> str:
        """What the job is, as its page and the Drills page's banner name it."""
        return f"Run of drill plan {self.plan.label}" if self.plan else "Drill campaign"

    @property
    def page(self) -> str:
        """Where the job is watched: a plan's run on its plan's page (``studio.plans``)."""
        if not self.plan:
            return f"/drills/jobs/{self.job_id}"
        name, _, version = self.plan.definition.rpartition("@")
        return f"/definitions/{name}/versions/{version}/plans/jobs/{self.job_id}"


def _check_names(wanted: list[str]) -> None:
    """Refuse a blank or overlong drill name before the catalogue echoes it back (it said
    ``no drill matches : see ...`` for a blank one, and repeated a name of any length)."""
    problems = [
        {"path": f"drills[{i}]", "message": f"drills[{i}] {why}"}
        for i, name in enumerate(wanted)
        if (why := _name_problem(name))
    ]
    if problems:
        raise Invalid.of(problems)


def _name_problem(name: str) -> str:
    if not name.strip():
        return "is empty: name a drill id (D1-kill-before_commit-s0) or a family (D1)"
    if len(name) > MAX_DRILL_NAME:
        return f"is {len(name)} characters long; a drill id or family has at most {MAX_DRILL_NAME}"
    return ""


class DrillJobs:
    """The campaigns of this studio process (kept in memory; runs are in the store)."""

    def __init__(self, store: Store, settings: StudioSettings) -> None:
        self.store = store
        self.settings = settings
        self._jobs: dict[str, DrillJob] = {}
        self._threads: dict[str, threading.Thread] = {}
        self._cancel: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = {}
        self._lock = threading.Lock()

    @property
    def artifacts(self) -> Path:
        return self.settings.drill_artifacts or Path(tempfile.gettempdir()) / "wayline-drills"

    def get(self, team: str, job_id: str) -> DrillJob:
        job = self._jobs.get(job_id)
        if job is None or job.team != team:
            raise NotFound("no such drill job in this studio")
        return job

    def running(self) -> DrillJob | None:
        return next((j for j in self._jobs.values() if j.running), None)

    def stop(self, team: str, job_id: str, actor: str) -> DrillJob:
        """Ask a running job to stop: its drill under way is cancelled (its processes
        killed, its schema dropped, as at the studio's shutdown), the drills it finished
        are kept and its run is recorded as stopped. Conflict once it has ended."""
        job = self.get(team, job_id)
        with self._lock:
            if not job.running:
                raise Conflict(f"the drill job has {job.status} already: there is nothing to stop")
            job.stopped_by = job.stopped_by or actor
            cancel = self._cancel.get(job_id)
        if cancel is not None:
            loop, task = cancel
            loop.call_soon_threadsafe(task.cancel)
        return job

    def start(self, team: str, actor: str, wanted: list[str], profile: str) -> DrillJob:
        """Start a campaign of ``wanted`` drills (ids or families) under ``profile``."""
        from verification.drills.catalogue import catalogue, select
        from verification.profiles import PROFILES

        if profile not in PROFILES:
            raise Invalid(f"profile is one of {', '.join(PROFILES)}")
        if not wanted:
            raise Invalid("choose at least one drill")
        _check_names(wanted)
        seed = random.SystemRandom().randrange(1, 2**31)
        try:
            chosen = select(catalogue(PROFILES[profile], seed), wanted)
        except ValueError as unknown:
            raise Invalid(str(unknown)) from None
        job = self._new_job(team, actor, profile, list(wanted), seed, len(chosen))

        def campaign(progress: DrillProgress) -> Awaitable[Outcome]:
            from verification.campaigns import run_drills

            return run_drills(
                self.settings.dsn, job.drills, job.profile, job.seed, progress,
                schema=self.settings.schema, artifacts=self.artifacts, team=job.team,
            )  # fmt: skip

        return self._launch(job, campaign)

    def start_plan(
        self,
        team: str,
        actor: str,
        drilled: Drilled,
        plan: Any,
        finished: Callable[[DrillJob, Outcome], Awaitable[None]],
    ) -> DrillJob:
        """Run one drill plan (``plan``: its saved version) in a throwaway schema;
        ``finished`` is awaited on the job's own loop once the run is recorded."""
        from verification.plan_drills import specs

        seed = random.SystemRandom().randrange(1, 2**31)
        ids = [s.id for s in specs([drilled], seed)]
        job = self._new_job(team, actor, "ci", ids, seed, len(ids), plan)

        async def run(progress: DrillProgress) -> Outcome:
            from verification.campaigns import run_plans

            outcome = await run_plans(
                self.settings.dsn, [drilled], seed, progress, schema=self.settings.schema,
                artifacts=self.artifacts, team=team,
            )  # fmt: skip
            await finished(job, outcome)
            return outcome

        return self._launch(job, run)

    def _new_job(
        self, team: str, actor: str, profile: str, drills: list[str], seed: int, total: int,
        plan: Any = None,
    ) -> DrillJob:  # fmt: skip
        """A new running job; Conflict while another runs (one at a time per studio)."""
        with self._lock:
            if self.running() is not None:
                raise Conflict(BUSY)
            job = DrillJob(
                uuid.uuid4().hex[:12], team, actor, profile, drills, seed, total,
                datetime.now(UTC), plan=plan,
            )  # fmt: skip
            self._jobs[job.job_id] = job
            self._forget_old()
        return job

    def _launch(
        self, job: DrillJob, work: Callable[[DrillProgress], Awaitable[Outcome]]
    ) -> DrillJob:
        thread = threading.Thread(
            target=self._run, args=(job, work), name=f"drills-{job.job_id}", daemon=True
        )
        self._threads[job.job_id] = thread
        thread.start()
        return job

    def _forget_old(self) -> None:
        finished = [j for j in self._jobs.values() if not j.running]
        for job in finished[: max(0, len(self._jobs) - KEEP_JOBS)]:
            self._jobs.pop(job.job_id, None)
            self._threads.pop(job.job_id, None)

    def _run(self, job: DrillJob, work: Callable[[DrillProgress], Awaitable[Outcome]]) -> None:
        """The campaign on this thread's own event loop."""

        def progress(done: int, total: int, drill: dict[str, Any]) -> None:
            job.finished.append(drill)

        async def campaign() -> None:
            task = asyncio.ensure_future(work(progress))
            with self._lock:  # a stop asked before the task existed cancels it now
                self._cancel[job.job_id] = (asyncio.get_running_loop(), task)
                if job.stopped_by:
                    task.cancel()
            outcome = await task
            job.run_id = outcome.run_id
            job.status = "finished"

        try:
            asyncio.run(campaign())
        except BaseException as error:
            if job.stopped_by and isinstance(error, asyncio.CancelledError):
                job.status = "stopped"
            else:  # the campaign broke (not a drill): say so
                log.warning("drill job %s failed", job.job_id, exc_info=True)
                job.error = f"{type(error).__name__}: {error}"
                job.status = "error"
        finally:
            job.finished_at = datetime.now(UTC)
            self._cancel.pop(job.job_id, None)

    async def close(self) -> None:
        """Stop running campaigns (their drills clean up their schemas and processes)."""
        for loop, task in list(self._cancel.values()):
            loop.call_soon_threadsafe(task.cancel)
        for thread in list(self._threads.values()):
            await asyncio.to_thread(thread.join, STOP_WAIT_SECONDS)
