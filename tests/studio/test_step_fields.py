"""The step form shows every field the engine allows for each kind, and no other."""

from __future__ import annotations

import pytest

from engine.modes.steps.validation import KIND_FIELDS
from studio.definitions.step_fields import all_paths, read_path, write_path


@pytest.mark.parametrize("kind", list(KIND_FIELDS))
def test_form_fields_cover_the_engine_fields_of_each_kind(kind) -> None:
    top_level = {path.split(".")[0] for path in all_paths(kind.value)} - {"name"}
    # branches are edited with the branch list, not a text field
    assert top_level == set(KIND_FIELDS[kind]) - {"branches"}


def test_paths_write_nested_objects_and_remove_empty_parents() -> None:
    step: dict = {}
    write_path(step, "compensation.retry.max_attempts", 3)
    assert read_path(step, "compensation.retry.max_attempts") == 3
    write_path(step, "compensation.retry.max_attempts", None)
    assert step == {}
