"""The step form shows every field the engine allows for each kind, and no other."""

from __future__ import annotations

import pytest

from engine.model.identifiers import NAME_RULE
from engine.modes.steps.validation import KIND_FIELDS
from studio.definitions.step_fields import KIND_SPECS, all_paths, read_path, write_path


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


@pytest.mark.parametrize("kind", list(KIND_SPECS))
def test_every_name_hint_says_the_whole_rule_the_engine_checks(kind: str) -> None:
    """A hint that said only the characters ("ASCII letters, digits, '.', '_' or '-'")
    admitted "_prep" and a name of 201 characters, which the engine refuses; each name
    field, and a signal's or approval's name, now says the length and the first
    character too."""
    specs = {spec.path: spec for spec in KIND_SPECS[kind]}
    assert NAME_RULE in specs["name"].help
    if kind in ("signal", "approval"):
        assert NAME_RULE in specs["target"].help
