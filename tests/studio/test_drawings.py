"""Every definition mode the engine installs has a drawing in the studio."""

from __future__ import annotations

import pytest

from engine import modes
from engine.model.definitions import Definition
from studio.drawings import DRAWINGS, MACHINE, STEP_LIST, drawing_of, drawing_of_document


def test_every_installed_mode_is_drawn() -> None:
    assert set(modes.installed()) <= set(DRAWINGS)


def test_a_mode_without_a_drawing_is_refused_clearly() -> None:
    journal = Definition("j", "1", "journal", False, ())  # type: ignore[arg-type]
    with pytest.raises(modes.ModeNotSupported, match="cannot draw a journal definition"):
        drawing_of(journal)


def test_a_document_is_drawn_by_its_mode_and_a_draft_of_no_known_mode_as_steps() -> None:
    assert drawing_of_document({"mode": "machine"}) is MACHINE
    assert drawing_of_document({"mode": "orchestration"}) is STEP_LIST
    assert drawing_of_document({"mode": 3}) is STEP_LIST
    assert drawing_of_document([]) is STEP_LIST
