"""The list's filters that read replayed state: a failure code matches the instance's
own and any attempt's, an earlier attempt that was retried and then succeeded too; a
code-first run is at the step or signal its open journal entries name."""

from __future__ import annotations

from engine.model.events import EventKind
from engine.model.instance import Instance
from studio.instances import attempts
from studio.instances.replays import Replayed, StudioFolding
from studio.instances.service import InstanceFilters, state_matches
from tests.unit import test_code_fold as code_fold
from tests.unit.histories import RICH, Run


def replayed(run: Run) -> Replayed:
    entry = StudioFolding.fold(run.registry, None, run.history)
    assert entry is not None
    return entry


def test_a_failure_code_of_a_retried_attempt_still_matches() -> None:
    run = Run(RICH)
    run.start()
    run.run_activity("a", "failed")  # code "boom", retried
    run.run_activity("a", "succeeded")
    entry = replayed(run)
    assert entry.state.activities["a"].code == "", "the latest attempt carries no code"

    assert state_matches(entry, InstanceFilters(view="all", failure_code="boom"))
    assert not state_matches(entry, InstanceFilters(view="all", failure_code="other"))
    assert state_matches(entry, InstanceFilters(view="all"))


def test_a_code_first_run_is_at_the_step_or_signal_its_open_entry_names() -> None:
    """A code-first run's progress is its journal: it stands at its open entries, by the
    names a person gives them (a step's name or call, a signal awaited), not only by its
    outline nodes' names (``step:reserve``), which no one types."""
    draft = code_fold.started()
    key = code_fold.step(draft, "reserve")

    def at(state: Instance, step: str) -> bool:
        entry = Replayed(state, attempts.EMPTY, ())
        return state_matches(entry, InstanceFilters(view="all", step=step))

    for name in ("reserve", "reserve.1", "reserve#1", "step:reserve", " reserve "):
        assert at(draft.state, name), name
    assert not at(draft.state, "paid") and not at(draft.state, "charge")

    code_fold.attempt(draft, key, 1, 1, EventKind.ATTEMPT_SUCCEEDED, {"held": "mug"})
    code_fold.race(draft, "paid", "cancelled")
    for name in ("paid", "cancelled", "race.1", "race:paid,cancelled"):
        assert at(draft.state, name), name
    assert not at(draft.state, "reserve"), "a settled step is where the run was, not is"
