"""Every definition mode the engine installs has a drawing in the studio."""

from __future__ import annotations

import pytest

from engine import modes
from engine.model.definitions import Definition
from studio.drawings import DRAWINGS, drawing_of

NOT_YET_DRAWN = {"machine"}
"""Installed modes the studio does not draw yet: a machine's state diagram is a later
step of issue 19. When it lands, this set becomes empty."""


def test_every_installed_mode_is_drawn() -> None:
    assert set(modes.installed()) - set(DRAWINGS) == NOT_YET_DRAWN


def test_a_mode_without_a_drawing_is_refused_clearly() -> None:
    machine = Definition("m", "1", "machine", False, ())  # type: ignore[arg-type]
    with pytest.raises(modes.ModeNotSupported, match="cannot draw a machine definition"):
        drawing_of(machine)
