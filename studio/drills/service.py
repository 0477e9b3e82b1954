"""Drill runs as the studio shows them: the catalogue, past runs, one scorecard, two
compared, and the drill instance a violation points at.

Runs are recorded in the studio's schema by ``verification.runs`` and read through the
team (a run of another team is not found). Drills run in throwaway schemas that are
dropped afterwards, so the instance a violation names survives only in the campaign's
replay corpus (``corpus.jsonl`` beside the run's artifacts): a violation links to that
captured history, event by event, for as long as the artifacts are kept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from engine import Store
from engine.model.events import Event, event_from_json
from studio.drills.families import about, order
from studio.drills.jobs import DrillJob
from studio.errors import Invalid, NotFound
from studio.instance_urls import instance_ref
from studio.paging import format_cursor, parse_cursor
from verification import runs
from verification.findings import named
from verification.runs import RunDetail, RunSummary

RUNS_PAGE = 25
CORPUS = "corpus.jsonl"


@dataclass(frozen=True)
class DrillChoice:
    """One drill as the run form offers it; ``owned_server`` drills need a PostgreSQL the
    harness owns (they stop, pause or cut it), so the form says they are not run here."""

    drill_id: str
    title: str
    owned_server: bool


@dataclass(frozen=True)
class Family:
    """A drill family (``D1``) with its drills, as the form lists them."""

    family: str
    title: str
    drills: tuple[DrillChoice, ...]
    about: str = ""
    """What the family tests (``studio.drills.families``)."""

    @property
    def owned_server(self) -> bool:
        return all(d.owned_server for d in self.drills)


def catalogue_view(profile: str) -> list[Family]:
    """Every drill of ``profile``, by family in reading order (``families.order``)."""
    from verification.drills.catalogue import catalogue
    from verification.profiles import PROFILES

    if profile not in PROFILES:
        raise Invalid(f"profile is one of {', '.join(PROFILES)}")
    families: dict[str, list[DrillChoice]] = {}
    titles: dict[str, str] = {}
    for spec in catalogue(PROFILES[profile], 0):
        families.setdefault(spec.family, []).append(
            DrillChoice(spec.id, spec.title, spec.owned_server)
        )
        titles.setdefault(spec.family, _family_title(spec.title))
    return [
        Family(f, titles[f], tuple(families[f]), about(f, titles[f]))
        for f in sorted(families, key=order)
    ]


def _family_title(title: str) -> str:
    """A family's title: its action for matrix families (``kill at ...`` -> ``kill``)."""
    return title.split(" at ")[0] if " at " in title else title


def profiles() -> list[str]:
    from verification.profiles import PROFILES

    return list(PROFILES)


async def runs_page(
    store: Store, team: str, before: str | None = None
) -> tuple[list[RunSummary], str]:
    """The team's runs, newest first, and the cursor of the next (older) page."""
    found = await runs.list_runs(store, RUNS_PAGE + 1, parse_cursor(before), team)
    more = len(found) > RUNS_PAGE
    shown = found[:RUNS_PAGE]
    last = shown[-1] if shown and more else None
    return shown, format_cursor((last.started_at, last.run_id)) if last else ""


async def run_detail(store: Store, team: str, run_id: str) -> RunDetail:
    found = await runs.get_run(store, run_id)
    if found is None or found.summary.team_id != team:
        raise NotFound("no such drill run in this team")
    return found


async def recorded_run(store: Store, job: DrillJob) -> str:
    """The run id a job is recorded under (known once its run row exists), or ''."""
    if job.run_id:
        return job.run_id
    for summary in await runs.list_runs(store, 20, None, job.team):
        if summary.seed == job.seed and summary.started_at >= _minute_before(job.started_at):
            job.run_id = summary.run_id  # found once; later polls need no read
            return summary.run_id
    return ""


def _minute_before(moment: datetime) -> datetime:
    return moment - timedelta(minutes=1)


@dataclass(frozen=True)
class ScorecardTables:
    """The scorecard's keyed sections in the order the text report uses (the stored JSON
    keeps keys sorted, which would put A and B before I1 and I10 before I2)."""

    invariants: list[tuple[str, dict[str, Any]]]
    boundaries: list[tuple[str, dict[str, Any]]]
    actions: list[str]


SCORECARD_UNITS = {
    "recovery": {"p50": " s", "p95": " s", "max": " s"},
    "replay": {"kill_rate": " %"},
}
"""The unit of each scorecard figure that is not a count, by section and key
(``verification.scorecard``: recovery times in seconds, a kill rate in percent)."""


def scorecard_tables(card: dict[str, Any]) -> ScorecardTables:
    from engine.worker.faults import Action, Boundary
    from verification.findings import NAMES

    invariants = card.get("invariants") or {}
    ordered = [k for k in NAMES if k in invariants] + [k for k in invariants if k not in NAMES]
    per_boundary = (card.get("faults") or {}).get("per_boundary") or {}
    boundaries = [b.value for b in Boundary if b.value in per_boundary]
    boundaries += [b for b in per_boundary if b not in boundaries]
    return ScorecardTables(
        [(k, invariants[k]) for k in ordered],
        [(b, per_boundary[b]) for b in boundaries],
        [a.value for a in Action],
    )


# Violations -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """One failure line of a drill, with the drill instance and event it names (if any)."""

    text: str
    instance_id: str = ""
    sequence: int = 0

    def link(self, run_id: str, drill_id: str) -> str:
        if not self.instance_id:
            return ""
        anchor = f"#event-{self.sequence}" if self.sequence else ""
        where = f"/drills/runs/{run_id}/drills/{drill_id}/instances"
        return f"{where}/{instance_ref(self.instance_id)}{anchor}"


def finding(text: str) -> Finding:
    """A violation with the instance and position it names (``findings.named``)."""
    where = named(text)
    return Finding(text, where.instance_id, where.sequence)


def findings(drill: dict[str, Any]) -> list[Finding]:
    return [finding(t) for t in drill.get("failures") or []]


@dataclass(frozen=True)
class CapturedInstance:
    """A drill instance as the replay corpus captured it before its schema was dropped."""

    run_id: str
    drill_id: str
    instance_id: str
    events: list[Event] = field(default_factory=list)


def corpus_path(detail: RunDetail) -> Path | None:
    card = detail.scorecard or {}
    directory = (card.get("identity") or {}).get("artifacts")
    return Path(directory) / CORPUS if directory else None


def captured_instance(detail: RunDetail, drill_id: str, instance_id: str) -> CapturedInstance:
    """The captured history of ``instance_id`` in ``drill_id``; NotFound once it is gone."""
    path = corpus_path(detail)
    if path is None or not path.is_file():
        raise NotFound("this run's artifacts (its replay corpus) are no longer on this host")
    marker = json.dumps(instance_id)
    with path.open() as corpus:
        for line in corpus:
            if marker not in line:
                continue
            document = json.loads(line)
            if document.get("drill") == drill_id and document.get("instance_id") == instance_id:
                events = [event_from_json(e) for e in document.get("events", [])]
                return CapturedInstance(detail.summary.run_id, drill_id, instance_id, events)
    raise NotFound(f"drill {drill_id} captured no instance {instance_id}")


# Comparing ------------------------------------------------------------------------------


@dataclass(frozen=True)
class DrillRow:
    drill_id: str
    left: str
    right: str

    @property
    def changed(self) -> bool:
        return self.left != self.right


@dataclass(frozen=True)
class Comparison:
    left: RunDetail
    right: RunDetail
    drills: list[DrillRow]
    numbers: list[tuple[str, Any, Any]]
    """(label, left value, right value) for the scorecard figures worth comparing."""

    @property
    def changed(self) -> list[DrillRow]:
        return [d for d in self.drills if d.changed]


FIGURES = (
    ("passed", ("summary", "passed")),
    ("failed", ("summary", "failed")),
    ("not run", ("summary", "not_run")),
    ("wall seconds", ("identity", "wall_seconds")),
    ("recovery p50 (s)", ("recovery", "p50")),
    ("recovery p95 (s)", ("recovery", "p95")),
    ("lease takeovers", ("leases", "takeovers")),
    ("stale writes accepted", ("leases", "stale_writes_accepted")),
    ("ambiguous commits", ("ambiguity", "ambiguous_commits")),
    ("events replayed", ("replay", "events_replayed")),
    ("instances/s under fault", ("cost", "instances_per_second_under_fault")),
)


def _figure(card: dict[str, Any] | None, path: tuple[str, str]) -> Any:
    section = (card or {}).get(path[0]) or {}
    return section.get(path[1])


def _invariants(card: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return (card or {}).get("invariants") or {}


async def compare(store: Store, team: str, left: str, right: str) -> Comparison:
    if not left or not right:
        raise Invalid("choose two runs to compare: one as A and another as B")
    if left == right:
        raise Invalid("A and B are the same run: choose two different runs to compare")
    one, two = await run_detail(store, team, left), await run_detail(store, team, right)
    verdicts = [{d["id"]: d["verdict"] for d in run.results} for run in (one, two)]
    ids = list(dict.fromkeys([*verdicts[0], *verdicts[1]]))
    drills = [DrillRow(i, verdicts[0].get(i, "—"), verdicts[1].get(i, "—")) for i in ids]
    numbers = [
        (label, _figure(one.scorecard, path), _figure(two.scorecard, path))
        for label, path in FIGURES
    ]
    names = {**_invariants(one.scorecard), **_invariants(two.scorecard)}
    numbers += [
        (
            f"{key} {entry['name']} violations",
            _invariants(one.scorecard).get(key, {}).get("violations"),
            _invariants(two.scorecard).get(key, {}).get("violations"),
        )
        for key, entry in names.items()
    ]
    return Comparison(one, two, drills, numbers)
