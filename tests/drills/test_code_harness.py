"""Fast checks of the harness's code-first parts (no database): the step_id oracle of
J2, the C drills in the catalogue and ``--workload``."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from engine.model.events import Event, EventKind
from studio.drills.service import catalogue_view
from verification import code_checks
from verification.code_checks import Attempts, expected_step_id, step_ids
from verification.drills.catalogue import catalogue, select, workload_of
from verification.findings import Findings
from verification.profiles import PROFILES
from verification.replay_check import History

T0 = datetime(2031, 6, 7, 8, 0, tzinfo=UTC)
RUN = "drill.code/r-1"
K = EventKind


def _attempts(*rows: tuple[EventKind, str, int, str]) -> History:
    """A code-first run's attempt events: (kind, step key, attempt, step_id if started)."""
    events = [
        Event(n, RUN, kind, T0, step=step, attempt=attempt, idempotency_key=key)
        for n, (kind, step, attempt, key) in enumerate(rows, start=1)
    ]
    return History(RUN, events)


def _j2(history: History) -> list[str]:
    findings = Findings()
    step_ids(findings, [history])
    return findings.checks["J2"].violations


def test_a_step_id_reads_run_step_occurrence_and_try() -> None:
    assert expected_step_id("order-saga/o-42", "charge.1", 0) == "order-saga/o-42/charge#1.1"
    assert expected_step_id(RUN, "work.2", 2) == f"{RUN}/work#2.3"


def test_step_ids_change_on_known_failures_and_loop_passes_only() -> None:
    """The seed's step_id table: a known failure changes the try, an unknown outcome
    (a crash between the effect and its recorded result) keeps it, a loop pass is a
    new occurrence."""
    history = _attempts(
        (K.ATTEMPT_STARTED, "reserve.1", 1, f"{RUN}/reserve#1.1"),
        (K.ATTEMPT_FAILED, "reserve.1", 1, ""),
        (K.ATTEMPT_STARTED, "reserve.1", 2, f"{RUN}/reserve#1.2"),
        (K.ATTEMPT_UNKNOWN, "reserve.1", 2, ""),
        (K.ATTEMPT_STARTED, "reserve.1", 3, f"{RUN}/reserve#1.2"),
        (K.ATTEMPT_STARTED, "work.1", 1, f"{RUN}/work#1.1"),
        (K.ATTEMPT_STARTED, "work.2", 1, f"{RUN}/work#2.1"),
    )
    assert _j2(history) == []


def test_a_step_id_that_changes_across_a_crash_is_caught() -> None:
    history = _attempts(
        (K.ATTEMPT_STARTED, "work.1", 1, f"{RUN}/work#1.1"),
        (K.ATTEMPT_UNKNOWN, "work.1", 1, ""),
        (K.ATTEMPT_STARTED, "work.1", 2, f"{RUN}/work#1.2"),
    )
    assert _j2(history) == [
        f"{RUN}: attempt 2 of work.1 ran under {RUN}/work#1.2, not {RUN}/work#1.1"
    ]


def test_the_ci_profile_runs_every_code_drill_family() -> None:
    code = catalogue(PROFILES["ci"], 0, "code")
    assert {s.family for s in code} == {"C1", "C3", "C4", "C5", "C6", "C7"}
    assert {workload_of(s) for s in code} == {"code"}
    assert {s.id for s in catalogue(PROFILES["ci"], 0)} >= {s.id for s in code}
    assert [s.id for s in select(code, ["C7"])] == ["C7-divergent-deploy-s0"]


def test_a_workload_chooses_its_drills_only() -> None:
    machine = catalogue(PROFILES["ci"], 0, "machine")
    flow = catalogue(PROFILES["ci"], 0, "flow")
    assert machine and {s.family[0] for s in machine} == {"M"}
    assert flow and not {s.family[0] for s in flow} & {"M", "C"}
    with pytest.raises(ValueError, match="workload is one of flow, machine, code"):
        catalogue(PROFILES["ci"], 0, "choreography")


def test_the_studio_titles_the_code_drill_families() -> None:
    titles = {f.family: f.title for f in catalogue_view("ci")}
    assert titles["C1"] == "a code-first step's worker SIGKILLed"
    assert titles["C7"] == "a deploy of divergent code while runs wait"


KEY = f"{RUN}/work#1.1"
STARTED = (RUN, KEY)


def _checked(attempts: list[tuple], entries: list[tuple], effects: list[tuple]) -> Findings:
    """J1 and J4 over rows as their statements return them: attempts (run, key, outcome
    kind), entries (run, key, entered, early, recorded), effects (run, key, count)."""
    findings = Findings()
    rows = Attempts(attempts)
    code_checks.effects_checked(findings, rows, entries, effects)
    code_checks.reruns_checked(findings, rows, entries)
    return findings


def test_one_effect_per_step_id_unless_it_recorded_an_unknown_outcome() -> None:
    twice = [(RUN, KEY, 2)]
    succeeded = [(*STARTED, int(K.ATTEMPT_SUCCEEDED))]
    after_crash = [(*STARTED, int(K.ATTEMPT_UNKNOWN)), (RUN, KEY, int(K.ATTEMPT_SUCCEEDED))]
    found = _checked(succeeded, [(RUN, KEY, 1, 0, 0)], twice).checks["J1"].violations
    assert found == [f"{RUN}: 2 effects under step_id {KEY}, which recorded no unknown"]
    assert _checked(after_crash, [(RUN, KEY, 2, 0, 0)], twice).checks["J1"].violations == []


def test_an_effect_under_a_step_id_no_attempt_started_is_caught() -> None:
    other = f"{RUN}/work#1.2"
    succeeded = [(*STARTED, int(K.ATTEMPT_SUCCEEDED))]
    found = _checked(succeeded, [], [(RUN, other, 1)]).checks["J1"].violations
    assert f"{RUN}: an effect under step_id {other}, which no attempt started" in found
    assert f"{RUN}: step_id {KEY} recorded success without any effect" in found


def test_a_body_run_again_after_its_outcome_was_recorded_is_caught() -> None:
    succeeded = [(*STARTED, int(K.ATTEMPT_SUCCEEDED))]
    entries = [(RUN, KEY, 2, 0, 1)]
    found = _checked(succeeded, entries, [(RUN, KEY, 1)]).checks["J4"].violations
    assert found == [f"{RUN}: the body of {KEY} ran again after its outcome was recorded"]
    stale = [(*STARTED, int(K.ATTEMPT_UNKNOWN)), (RUN, KEY, int(K.ATTEMPT_SUCCEEDED))]
    assert _checked(stale, entries, [(RUN, KEY, 2)]).checks["J4"].violations == []


def test_an_effect_undone_once_by_its_compensation() -> None:
    """An undo runs under its step's step_id; it is counted per compensated step."""
    reserve = f"{RUN}/reserve#1.2"

    def undos(compensations: list[tuple], rows: list[tuple]) -> list[str]:
        findings = Findings()
        code_checks.undos_checked(findings, compensations, rows)
        return findings.checks["J1"].violations

    assert undos([(RUN, "reserve.1", 1, 1, 0)], [(RUN, reserve, 1)]) == []
    assert undos([(RUN, "reserve.1", 1, 1, 0)], [(RUN, reserve, 2)]) == [
        f"{RUN}: reserve.1 undone 2 times, its compensation never unknown"
    ]
    assert undos([(RUN, "reserve.1", 2, 1, 1)], [(RUN, reserve, 2)]) == []
    assert undos([], [(RUN, reserve, 1)]) == [
        f"{RUN}: reserve.1 undone 1 times, but no compensation started"
    ]
    assert undos([(RUN, "reserve.1", 1, 1, 0)], []) == [
        f"{RUN}: the compensation of reserve.1 succeeded without undoing it"
    ]
