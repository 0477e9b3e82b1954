"""The role each machine acts as: the strongest of its grants, on its own resource."""

from __future__ import annotations

import pytest

from engine.model.validation import parse_definition
from engine.modes.machines.grants import NO_GRANTS_ROLE, role_of, roles_of
from tests.unit.machines import approval_document


@pytest.mark.parametrize(
    ("grants", "role"),
    [
        (["DbRead<Documents>", "DbWrite<Documents>"], "wayline_documents_write"),
        (["DbWrite<Documents>"], "wayline_documents_write"),
        (["DbRead<Documents>"], "wayline_documents_read"),
        ([], NO_GRANTS_ROLE),
    ],
)
def test_a_machine_acts_as_the_strongest_role_its_grants_name(grants: list[str], role: str) -> None:
    definition = parse_definition({**approval_document(), "grants": grants})

    assert role_of(definition.manifest) == role  # type: ignore[arg-type]


def test_a_resource_names_its_roles_as_postgresql_folds_names() -> None:
    roles = roles_of("DrillRows")

    assert (roles.read, roles.write) == ("wayline_drillrows_read", "wayline_drillrows_write")
