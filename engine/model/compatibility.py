"""Compatibility of running instances with a new version: one report for every mode.

Before a version of a name is published, each running or paused instance of its other
versions is judged: could it move to the new version where it stands? Each mode judges
its own way (``DefinitionMode.judge``: a step list by its per-step progress, a machine
by its current state, a code-first run by replaying its journal against the new code),
and every mode's answer is a ``Verdict`` in one ``CompatibilityReport``, which the
catalog stores with the version, the command line prints and the studio shows.

A verdict is compatible when its ``reason`` is empty; otherwise the reason says, in one
line an operator can act on, why not (``step charge is in flight and was removed``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.model.definitions import DefinitionRef
from engine.model.errors import WaylineError
from engine.model.words import counted

MAX_JUDGED_INSTANCES = 1000
"""The most instances one report judges; a name with more running is reported as not
fully judged, and publishing it with ``require_compatible`` is refused."""
MAX_LISTED_REFUSALS = 10
"""The most incompatible instances a refusal message names (the rest are counted)."""


class IncompatibleInstances(WaylineError):
    """Publishing or migrating was refused: an instance cannot move to the version.

    ``reason`` is the refusal without the instance's id, for a list whose every line
    already names it (a bulk's results: ``refused order-81: <reason>``); ``report`` is
    the report a refused publish was judged by, so a caller that knows the instances by
    other ids (a team's, in the studio) can say it again in them (``refusal``)."""

    def __init__(
        self, message: str, reason: str = "", report: CompatibilityReport | None = None
    ) -> None:
        super().__init__(message)
        self.reason = reason or message
        self.report = report

    @classmethod
    def not_migrated(cls, verdict: Verdict, target: DefinitionRef) -> IncompatibleInstances:
        """``order-81: step charge is in flight and was removed; it was not migrated to
        order@2``: a migration the judge refused, naming the instance and why."""
        why = f"{verdict.reason}; it was not migrated to {target}"
        return cls(f"{verdict.instance_id}: {why}", why)


@dataclass(frozen=True)
class Verdict:
    """One instance judged against the new version: compatible when ``reason`` is ''."""

    instance_id: str
    from_version: str
    from_fingerprint: str
    reason: str = ""

    @property
    def compatible(self) -> bool:
        return not self.reason

    @property
    def line(self) -> str:
        """``order-77: step charge is in flight and was removed`` (incompatible ones)."""
        return f"{self.instance_id}: {self.reason}"

    def to_json(self) -> dict[str, Any]:
        return {
            "instance_id": self.instance_id,
            "from_version": self.from_version,
            "from_fingerprint": self.from_fingerprint,
            "compatible": self.compatible,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class CompatibilityReport:
    """Every verdict on the running instances of a name's other versions against
    ``definition``; ``complete`` is False when more than MAX_JUDGED_INSTANCES ran."""

    definition: DefinitionRef
    verdicts: tuple[Verdict, ...] = ()
    complete: bool = True
    incompatible: tuple[Verdict, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        bad = tuple(v for v in self.verdicts if not v.compatible)
        object.__setattr__(self, "incompatible", bad)

    @property
    def compatible_count(self) -> int:
        return len(self.verdicts) - len(self.incompatible)

    @property
    def acceptable(self) -> bool:
        """Whether ``require_compatible`` lets the version be published."""
        return self.complete and not self.incompatible

    def summary(self) -> list[str]:
        """``order@2: 14 running checked: 13 compatible, 1 incompatible``, then one line
        per incompatible instance (``incompatible order-77 (v1): <reason>``)."""
        lines = [
            f"{self.definition}: {len(self.verdicts)} running checked: "
            f"{self.compatible_count} compatible, {len(self.incompatible)} incompatible"
            + ("" if self.complete else f" (only the first {MAX_JUDGED_INSTANCES} judged)")
        ]
        lines += [
            f"incompatible {v.instance_id} (v{v.from_version}): {v.reason}"
            for v in self.incompatible
        ]
        return lines

    def refusal(self, shown: Callable[[str], str] = str) -> str:
        """Why ``require_compatible`` refuses this version: the incompatible instances,
        at most MAX_LISTED_REFUSALS of them named (each id as ``shown`` gives it)."""
        if not self.complete and not self.incompatible:
            return (
                f"{self.definition} was not published: more than {MAX_JUDGED_INSTANCES} "
                "instances are running, so not all could be judged"
            )
        named = "; ".join(
            f"{shown(v.instance_id)}: {v.reason}" for v in self.incompatible[:MAX_LISTED_REFUSALS]
        )
        more = len(self.incompatible) - MAX_LISTED_REFUSALS
        rest = f"; and {more} more" if more > 0 else ""
        return (
            f"{self.definition} was not published: "
            f"{counted(len(self.incompatible), 'running instance')} cannot move to it: "
            f"{named}{rest}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "definition": self.definition.to_json(),
            "complete": self.complete,
            "compatible": self.compatible_count,
            "incompatible": len(self.incompatible),
            "verdicts": [v.to_json() for v in self.verdicts],
        }


def report_from_json(document: dict[str, Any]) -> CompatibilityReport:
    """The report ``CompatibilityReport.to_json`` wrote (as the catalog stores it)."""
    return CompatibilityReport(
        DefinitionRef(**document["definition"]),
        tuple(
            Verdict(v["instance_id"], v["from_version"], v["from_fingerprint"], v["reason"])
            for v in document["verdicts"]
        ),
        document["complete"],
    )
