"""The JSON shapes of ``/api/holds``: a hold with its backlog and releases, placing one
and releasing one."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from engine.api.queries import Hold


@dataclass
class HoldReleaseOut:
    mode: str
    amount: float
    released_by: str
    reason: str
    released_at: datetime


@dataclass
class HoldOut:
    id: str
    definition: str
    """What it covers: a name, name@version, or '' for the whole team."""
    placed_by: str
    reason: str
    placed_at: datetime
    active: bool
    released_at: datetime | None
    drain_rate: float | None
    backlog: int
    """Instances whose work waits for a release."""
    releases: list[HoldReleaseOut]


@dataclass
class HoldIn:
    """Hold a definition (``definition``: NAME or NAME@VERSION) or the whole team."""

    scope: Literal["definition", "team"]
    reason: str
    definition: str = ""


@dataclass
class ReleaseIn:
    """Release everything (neither count nor rate), ``count`` instances, or ``rate``
    instances per second until none is left."""

    reason: str
    count: int | None = None
    rate: float | None = None


@dataclass
class ReleasedOut:
    hold: HoldOut
    due: int
    """Work items that became due again at once."""


def hold_out(hold: Hold) -> HoldOut:
    scope = hold.scope
    releases = [
        HoldReleaseOut(r.mode.value, r.amount, r.actor, r.reason, r.released_at)
        for r in hold.releases
    ]
    return HoldOut(
        hold.hold_id,
        scope.label if scope.name else "",
        hold.actor,
        hold.reason,
        hold.placed_at,
        hold.active,
        hold.released_at,
        hold.drain_rate,
        hold.backlog,
        releases,
    )
