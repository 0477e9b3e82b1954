"""The diff of two code workflow versions: the durable verbs their outlines reach.

Replay matches a run's journal to its code by verb and name, so that is what a reviewer
of a new version needs to see: which steps, waits, races and spawns were added or
removed, and which changed their options (retries, timeout, compensation). Verb nodes
are matched by their outline name (``step:charge``), compared on every field but the
line they are on (moving code is not a change), and the code's own digest, module and
function are compared beside the definition's fields. It is the step lists'
``DefinitionDiff``, so pages and the API show it the same way.
"""

from __future__ import annotations

from typing import Any

from studio.code.outline_graph import VERBS, read_outline
from studio.definitions.diff import (
    TOP_FIELDS,
    DefinitionDiff,
    named_changes,
    top_changes,
)

DECLARATIONS = ("module", "function", "code")
PLACE = ("line",)
"""Outline fields that say where a verb is, not what it does."""


def diff_outlines(left: Any, right: Any) -> DefinitionDiff:
    """The diff from code workflow document ``left`` to ``right``."""
    top = top_changes(left, right, (*TOP_FIELDS, *DECLARATIONS))
    return DefinitionDiff(top, tuple(named_changes(_verbs(left), _verbs(right))))


def _verbs(document: Any) -> dict[str, tuple[str, dict[str, Any]]]:
    """Verb node name -> (verb, its fields but its place), first occurrence kept."""
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    for shape in read_outline(document).steps:
        if shape.kind in VERBS:
            fields = {k: v for k, v in shape.raw.items() if k not in PLACE}
            found.setdefault(shape.name, (shape.kind, fields))
    return found
