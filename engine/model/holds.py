"""Incident holds as a caller names them: what a hold covers, how it is released, and
the bounds of a gradual release. The store keeps them (``engine.store.holds``)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from engine.model.errors import FieldRefused, InputRefused, WaylineError
from engine.model.identifiers import name_problem, split_pin

MAX_RELEASE_COUNT = 10_000
"""Instances one gradual release by count lets go at once."""
MAX_RELEASE_RATE = 1_000.0
"""Instances per second a gradual release by rate lets go, at most."""


class HoldNotFound(WaylineError):
    """No hold of this team has this id."""


class HoldReleased(WaylineError):
    """The hold was released already: it holds nothing new."""


class ReleaseMode(StrEnum):
    ALL = "all"
    """The hold ends now and all of its parked work is due again."""
    COUNT = "count"
    """That many instances resume (the longest-waiting first); the hold stays."""
    RATE = "rate"
    """Instances resume at that many per second; the hold ends when none is left."""


@dataclass(frozen=True)
class HoldScope:
    """What a hold covers: a team's definition name, one version of it, or (name '')
    the whole team."""

    team: str
    name: str = ""
    version: str = ""

    @property
    def label(self) -> str:
        if not self.name:
            return f"team {self.team or '(engine)'}"
        return f"{self.name}@{self.version}" if self.version else self.name


def parse_scope(team: str, definition: str | None) -> HoldScope:
    """The scope of ``--definition NAME[@VERSION]`` (None: the whole team); InputRefused
    naming what was wrong."""
    if definition is None:
        return HoldScope(team)
    try:
        name, version = split_pin(definition)  # '' too: an empty name must not hold the team
    except ValueError as bad:
        raise InputRefused(str(bad)) from None
    return check_scope(HoldScope(team, name, version or ""))


def check_scope(scope: HoldScope) -> HoldScope:
    """``scope`` when it is a HoldScope whose name and version are names (a version
    only with its name); InputRefused naming what was wrong (a definition name given
    as a str is told to use ``parse_scope``)."""
    if not isinstance(scope, HoldScope):
        raise InputRefused(
            f"a hold's scope is a HoldScope, not {type(scope).__name__}: "
            "parse_scope(team, 'NAME[@VERSION]'), or parse_scope(team, None) for a team"
        )
    if scope.name and (problem := name_problem(scope.name)):
        raise InputRefused(f"the definition name {problem}")
    if scope.version and (problem := name_problem(scope.version)):
        raise InputRefused(f"the version {problem}")
    if scope.version and not scope.name:
        raise InputRefused("a hold on a version names its definition too")
    return scope


def release_amount(mode: ReleaseMode, amount: float | None) -> float:
    """The checked amount of a release: a count of instances from 1 to
    MAX_RELEASE_COUNT, a rate above 0 up to MAX_RELEASE_RATE per second, none for all.
    FieldRefused names the field refused (``count`` or ``rate``)."""
    if mode is ReleaseMode.ALL:
        if amount is not None:
            raise InputRefused("a release of everything takes no count or rate")
        return 0.0
    if mode is ReleaseMode.COUNT:
        if isinstance(amount, bool) or not isinstance(amount, int):
            raise FieldRefused(
                "count", f"the count must be a whole number from 1 to {MAX_RELEASE_COUNT}"
            )
        if not 1 <= amount <= MAX_RELEASE_COUNT:
            raise FieldRefused(
                "count", f"the count must be from 1 to {MAX_RELEASE_COUNT} instances, not {amount}"
            )
        return float(amount)
    if isinstance(amount, bool) or not isinstance(amount, int | float):
        raise FieldRefused(
            "rate", f"the rate must be a number above 0 and at most {MAX_RELEASE_RATE:g}"
        )
    if not 0 < amount <= MAX_RELEASE_RATE:
        raise FieldRefused(
            "rate",
            f"the rate must be above 0 and at most {MAX_RELEASE_RATE:g} instances per second, "
            f"not {amount:g}",
        )
    return float(amount)
