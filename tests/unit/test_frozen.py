"""``evolve``: the replay's copy-with-changes of a frozen state, same as ``replace``."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, replace
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.model.frozen import evolve
from engine.model.instance import AttemptProgress, AttemptStatus
from tests.integration.transition_builders import catalog

PROGRESS = AttemptProgress(
    step="a", status=AttemptStatus.READY, scheduled_sequence=2, attempt=1, idempotency_key="k"
)


@given(
    attempt=st.integers(min_value=1, max_value=1000),
    status=st.sampled_from(list(AttemptStatus)),
    code=st.text(max_size=20),
    due=st.none() | st.datetimes(timezones=st.just(UTC)),
)
def test_evolve_is_replace(
    attempt: int, status: AttemptStatus, code: str, due: datetime | None
) -> None:
    changes = {"attempt": attempt, "status": status, "code": code, "due_at": due}
    evolved = evolve(PROGRESS, **changes)
    assert evolved == replace(PROGRESS, **changes)
    assert evolved is not PROGRESS and PROGRESS.attempt == 1  # the original is untouched
    with pytest.raises(FrozenInstanceError):
        evolved.attempt = 2  # type: ignore[misc]


def test_a_name_that_is_no_field_is_refused() -> None:
    with pytest.raises(TypeError, match="AttemptProgress has no field atempt"):
        evolve(PROGRESS, atempt=2)


def test_a_cached_property_of_the_old_values_is_not_carried_over() -> None:
    registry = catalog()
    flow = registry.flow(registry.single, "i")
    state = flow.after(flow.start())
    assert state.digest  # computed and cached on the old state
    moved = evolve(state, sequence=state.sequence + 1)
    assert moved.digest == replace(state, sequence=state.sequence + 1).digest != state.digest
