"""Drill plans for one published version: saving, reading, running, and what a run and
the version's coverage look like.

The plan's definition is the team's published version (read through the studio's
definitions service, so another team's version is not found); a plan is checked by the
harness's own rules before it is saved and again before it runs. A run is a drill job
(``studio.drills.jobs``): the harness publishes the version into a throwaway schema,
runs the instance there with stubbed activities and drops the schema afterwards, so it
never touches the team's instances. When the run is recorded, each fired pin keeps its
cell's own verdict (``verification.attribution``) for the heatmap (``studio.plans.saved``).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from engine import Store
from engine.api.queries import PublishedVersion
from engine.model.definitions import Definition, Mode
from engine.model.words import with_article
from studio.definitions import service as definitions
from studio.drills import service as drills
from studio.drills.jobs import DrillJob
from studio.errors import Invalid, NotFound
from studio.plans import documents, heatmap, outcome, saved
from studio.plans.documents import WorkingPlan
from studio.principal import Principal
from studio.runtime import Runtime
from verification import plan as plans
from verification.plan_drills import Drilled

PLAN_MODES = frozenset({Mode.ORCHESTRATION, Mode.MACHINE, Mode.CODE})
"""The modes the plan pages draw (a code-first workflow's plans are saved, exported and
covered here but run only from ``wayline drill run``: ``STUDIO_CODE``)."""
STUDIO_CODE = (
    "a code-first plan runs your own code from its app ({app}), and the studio does not "
    "load your code: export the plan and run `{command}` where that app can be imported"
)
MAX_PLAN_NAME = documents.PLAN_NAME_CHARS
MAX_PLAN_VERSION = 2**31 - 1
"""The highest plan version (the column is an integer)."""
STUDIO_RESTART = (
    f"{plans.OWNED_SERVER_NEEDED}, and the studio runs plans on its own database: export "
    "the plan and this version's JSON (Export JSON on the version's page), in the plan put "
    '"definition_file": that file in place of "definition": "{ref}" (a private cluster has '
    "no published versions), and run `{command}` without --dsn"
)
"""Said when a Run of a plan that restarts the server is refused: the exported plan names
its definition as ``NAME@VERSION``, which the command line reads only from ``--dsn``,
and ``--dsn`` refuses the restart, so the plan is runnable only with the file."""
VERSION_DIGITS = re.compile(r"[0-9]{1,10}")
"""ASCII digits only: ``str.isdigit`` also takes ``²``, which ``int`` refuses."""


async def definition_of(runtime: Runtime, team: str, name: str, version: str) -> Definition:
    """The team's published version; Invalid when plans do not drill its mode."""
    return plannable(await definitions.version_of(runtime, team, name, version))


def plannable(published: PublishedVersion) -> Definition:
    """The published version's definition; Invalid when plans do not drill its mode."""
    found = published.definition
    if found.mode not in PLAN_MODES:
        modes = " and ".join(sorted(m.value for m in PLAN_MODES))
        raise Invalid(
            f"{found.name}@{found.version} is {with_article(found.mode.value)} definition; "
            f"drill plans pin faults on {modes} definitions"
        )
    return found


def export_name(plan: saved.SavedPlan) -> str:
    """The file name a plan version is exported as (and the CLI command names)."""
    return f"{plan.name}.v{plan.version}.json".replace('"', "")


def run_command(plan: saved.SavedPlan) -> str:
    """The command that runs the plan version's export (its file name quoted for a
    shell when it must be)."""
    return f"wayline drill run --plan {shlex.quote(export_name(plan))}"


def plan_name(name: str) -> str:
    """The plan's name, stripped; Invalid when empty, too long or holding a control
    character (a tab, a line break): the name is shown, put in a command to copy and in
    the export's file name, where a line break made no sense and broke the download."""
    name = name.strip()
    if not name or len(name) > MAX_PLAN_NAME:
        raise Invalid(f"name the plan (1 to {MAX_PLAN_NAME} characters)")
    if not name.isprintable():
        raise Invalid(
            f"name the plan with 1 to {MAX_PLAN_NAME} printable characters "
            "(no tab, line break or other control character)"
        )
    return name


async def save(
    runtime: Runtime, principal: Principal, definition: Definition, working: WorkingPlan
) -> saved.SavedPlan:
    """The working plan saved as the next version of its name; Invalid listing every
    problem when it could not run."""
    name = plan_name(working.name)
    if not working.valid:
        raise Invalid("the drill plan is not valid", _located(working.all_problems()))
    document = {**working.document, "name": name}
    return await saved.save(
        runtime.store, principal.team_id, name, documents.ref(definition), document,
        principal.actor,
    )  # fmt: skip


def plan_version(text: str | int | None) -> int | None:
    """A plan version from a path or query (None: the latest); Invalid unless whole."""
    if text is None or isinstance(text, int):
        return text
    if not VERSION_DIGITS.fullmatch(text) or not 1 <= int(text) <= MAX_PLAN_VERSION:
        raise Invalid(f"a plan version is a whole number from 1 to {MAX_PLAN_VERSION}")
    return int(text)


async def saved_plan(
    runtime: Runtime, team: str, name: str, number: str | int | None
) -> saved.SavedPlan:
    version = plan_version(number)
    found = await saved.get(runtime.store, team, name, version)
    if found is None:
        which = f"{name} v{version}" if version else name
        raise NotFound(f"no drill plan {which} in this team")
    return found


def run(
    runtime: Runtime, principal: Principal, definition: Definition, plan: saved.SavedPlan
) -> DrillJob:
    """Start a run of ``plan`` (Conflict while another drill job runs)."""
    if plan.definition != documents.ref(definition):
        raise Invalid(f"{plan.label} drills {plan.definition}, not {documents.ref(definition)}")
    if definition.mode is Mode.CODE:
        app = str(plan.document.get("app") or "MODULE:APP")
        why = STUDIO_CODE.format(app=app, command=run_command(plan))
        raise Invalid(f"{plan.label} cannot run here: {why}")
    problems = documents.check(plan.document, definition)
    if problems:
        raise Invalid("the drill plan cannot run", _located(problems))
    parsed = plans.parse(plan.document)
    if plans.restarts(parsed):
        why = STUDIO_RESTART.format(ref=plan.definition, command=run_command(plan))
        raise Invalid(f"{plan.label} cannot run here: {why}")
    drilled = Drilled(parsed, definition)
    settings = runtime.settings

    async def finished(job: DrillJob, outcome_: Any) -> None:
        """On the job's own loop: the studio's pool belongs to the studio's loop."""
        drill = (outcome_.card.get("drills") or [{}])[0]
        result = (drill.get("extra") or {}).get("plan") or {}
        pins = result.get("pins", [])  # each fired one with its cell's verdict
        store = await Store.open(settings.dsn, settings.schema)
        try:
            await saved.record_run(
                store, job.team, plan, outcome_.run_id, drill.get("verdict", "failed"),
                pins, job.actor,
            )  # fmt: skip
        finally:
            await store.close()

    return runtime.drills.start_plan(principal.team_id, principal.actor, drilled, plan, finished)


def job_of(runtime: Runtime, team: str, job_id: str) -> DrillJob:
    job = runtime.drills.get(team, job_id)
    if job.plan is None:
        raise NotFound("no such drill plan run in this studio")
    return job


async def run_view(runtime: Runtime, job: DrillJob) -> tuple[outcome.RunView, str]:
    """What the run shows now, and the run id it is recorded under ('' until known)."""
    pins = list(plans.parse(job.plan.document).pins)
    run_id = await drills.recorded_run(runtime.store, job)
    if job.finished:  # the drill ended; the job still records the run until it is done
        view = outcome.finished(job.finished[0], pins)
        view.status = job.status
        return view, run_id
    if job.status == "error":
        view = outcome.live("error", pins, None)
        view.findings.append(f"The run itself broke: {job.error}")
        return view, run_id
    report = _report(runtime, run_id, job)
    return outcome.live(job.status, pins, report), run_id


def _report(runtime: Runtime, run_id: str, job: DrillJob) -> Path | None:
    if not run_id or not job.drills:
        return None
    return runtime.drills.artifacts / run_id / job.drills[0] / outcome.REPORT


async def coverage(
    runtime: Runtime, team: str, definition: Definition
) -> list[heatmap.StepCoverage]:
    ref = documents.ref(definition)
    return heatmap.coverage(
        definition,
        await saved.listed(runtime.store, team, ref),
        await saved.runs_of(runtime.store, team, ref),
    )


def _located(problems: list[str]) -> list[dict[str, str]]:
    """A plan's problems as the API locates a body's: each at its path in the plan."""
    return [{"path": path, "message": said} for path, said in map(plans.located, problems)]
