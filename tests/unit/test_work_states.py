"""Work states are named once (``WorkState``): no statement of the store compares or
sets the work table's ``state`` with a bare number, so a reader never has to know that
2 means leased, and the numbers cannot drift apart between statements."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import engine.store
from engine.store.rows import WorkState

STORE = Path(engine.store.__file__).parent
BARE_STATE = re.compile(r"\bstate\s*(?:=|<>|!=|<=|>=|<|>)\s*\d|\bstate\s+(?:IN|BETWEEN)\s*\(?\s*\d")


def assigned_sources(path: Path) -> list[tuple[int, str]]:
    """The source text of every value assigned in ``path`` (statement constants and the
    parts they are built from), leaving out docstrings and comments, which may say
    ``state = 1`` to explain a plan."""
    source = path.read_text()
    tree = ast.parse(source)
    values = [n.value for n in ast.walk(tree) if isinstance(n, ast.Assign | ast.AnnAssign)]
    return [(v.lineno, ast.get_source_segment(source, v) or "") for v in values if v]


@pytest.mark.parametrize("path", sorted(STORE.glob("*.py")), ids=lambda p: p.name)
def test_no_statement_names_a_work_state_by_its_number(path: Path) -> None:
    bare = [
        f"{path.name}:{line}: {match.group(0)}"
        for line, text in assigned_sources(path)
        for match in BARE_STATE.finditer(text)
    ]
    assert not bare, "use WorkState instead of a number:\n" + "\n".join(bare)


def test_work_states_keep_the_numbers_of_the_table_and_its_indexes() -> None:
    # migrations/0001_core.sql and 0017_holds.sql: CHECK (state BETWEEN 1 AND 5) and
    # partial indexes on state = 1, 2, 4 and 5; the statements must render the same
    # numbers to match them.
    assert [(s.name, int(s)) for s in WorkState] == [
        ("AVAILABLE", 1),
        ("LEASED", 2),
        ("COMPLETED", 3),
        ("DEAD_LETTERED", 4),
        ("HELD", 5),
    ]
    assert f"state = {WorkState.LEASED}" == "state = 2"
