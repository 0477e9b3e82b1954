"""Every statement of the store is a named constant in ``engine/store/statements``.

A newcomer looking for "the statement that claims work" finds it by name in its table
family's module there; the modules that run statements hold none of their own.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

STORE = Path(__file__).resolve().parents[2] / "engine" / "store"
STATEMENT = re.compile(r"\s*(SELECT|INSERT|UPDATE|DELETE|WITH|CREATE|ALTER|DROP)\b", re.I)


def statement_constants(path: Path) -> list[str]:
    """The module-level names ``path`` binds to SQL statement text."""
    found = []
    for node in ast.parse(path.read_text()).body:
        if not (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)):
            continue
        value = node.value
        if isinstance(value, ast.Call) and value.args:  # one_line(f"...")
            value = value.args[0]
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            text = value.value
        elif isinstance(value, ast.JoinedStr):
            text = "".join(v.value for v in value.values if isinstance(v, ast.Constant))
        else:
            continue
        if STATEMENT.match(text):
            found.append(node.targets[0].id)
    return found


def test_statements_live_only_in_the_statements_package() -> None:
    elsewhere = {
        f"{path.relative_to(STORE)}: {name}"
        for path in STORE.glob("*.py")
        for name in statement_constants(path)
    }
    assert not elsewhere, "statements outside engine/store/statements: " + ", ".join(elsewhere)


def test_the_scan_sees_the_statements_it_guards() -> None:
    claims = statement_constants(STORE / "statements" / "leases.py")
    assert {"CLAIM", "RENEW_LEASE", "COMPLETE_LEASE", "FENCED_SET"} <= set(claims)
