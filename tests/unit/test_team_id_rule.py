"""A team id names export files and prefixes stored instance ids, so what the engine
accepts as one can hold no path, separator or space; '' is the engine's own team."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.model.errors import InputRefused
from engine.model.identifiers import TEAM_RULE, TEAM_SEPARATOR, team_problem
from engine.model.inputs import check_team


@pytest.mark.parametrize("team", ["", "red", "team-a", "7", "a" * 63])
def test_team_ids_the_studio_makes_are_accepted(team: str) -> None:
    assert team_problem(team) is None
    check_team(team)


@pytest.mark.parametrize(
    "team", ["../escaped", "Red", "no such ü", "a:b", "a/b", "-a", "a" * 64, " red", 7, None]
)
def test_anything_else_is_refused_with_the_rule(team: object) -> None:
    with pytest.raises(InputRefused, match=f"a team id has {TEAM_RULE}"):
        check_team(team)


@given(st.text(max_size=80))
def test_an_accepted_team_id_is_a_safe_file_name_and_prefix(team: str) -> None:
    if team_problem(team) is None:
        assert len(team) <= 63
        assert not set(team) & {"/", "\\", ".", TEAM_SEPARATOR, " ", "\x00"}
        assert team == team.strip().lower()
