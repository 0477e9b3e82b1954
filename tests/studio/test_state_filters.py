"""The list's filters that read replayed state: a failure code matches the instance's
own and any attempt's, an earlier attempt that was retried and then succeeded too."""

from __future__ import annotations

from studio.instances.replays import Replayed, StudioFolding
from studio.instances.service import InstanceFilters, state_matches
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
