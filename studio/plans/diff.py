"""Two versions of a drill plan compared: pins added and removed, and a line diff of
their documents (as exported, keys sorted, so only real changes show)."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any

from studio.plans.saved import SavedPlan
from verification import plan as plans


@dataclass(frozen=True)
class PlanDiff:
    left: SavedPlan
    right: SavedPlan
    added: list[str]
    removed: list[str]
    kept: list[str]
    lines: list[str]
    """A unified diff of the two documents (empty when they are the same)."""


def _pins(document: dict[str, Any]) -> list[str]:
    return [pin.label for pin in plans.parse(document).pins]


def _text(document: dict[str, Any]) -> list[str]:
    return json.dumps(document, indent=2, sort_keys=True).splitlines()


def diff(left: SavedPlan, right: SavedPlan) -> PlanDiff:
    before, after = _pins(left.document), _pins(right.document)
    lines = difflib.unified_diff(
        _text(left.document), _text(right.document), left.label, right.label, lineterm=""
    )
    return PlanDiff(
        left,
        right,
        [p for p in after if p not in before],
        [p for p in before if p not in after],
        [p for p in after if p in before],
        list(lines),
    )
