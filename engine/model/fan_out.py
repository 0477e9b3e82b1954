"""A parent's children as a team whose workflows fan out reads them: how each one ended
or stands, and how far the fan-out has got (``children: 2 of 3 done (1 failed), 1
running``), written once for ``wayline inspect``, the studio's instance page and its API.

A parent knows its children only through its own history, and a child's end reaches
that history only while the parent has not ended (``engine.decide.child_outcomes``). So
a parent cancelled or terminated together with its children (``engine.decide.
child_cascade``) kept calling them "no longer awaited", as if they ran on, and a
parent's page showed each child's start machine (``active``, ``start_running``) rather
than what the child is. Here the parent's state says what its cancel or terminate did
to each child it still awaited, and the child's own status, when read
(``engine.store.reads.fan_out``), says where the child is now.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.decide.audit import Action
from engine.model.endings import ending
from engine.model.instance import ChildProgress, ChildStatus, Instance, InstanceStatus

C = ChildStatus
S = InstanceStatus
AWAITED = frozenset({C.SCHEDULED, C.START_RUNNING, C.ACTIVE, C.START_UNKNOWN, C.RETRY_WAITING})
"""A child's states in which its parent still awaits it (its start or its outcome)."""
CANCELLED_WITH = frozenset({S.CANCELLING, S.CANCELLED, S.TERMINATED})
"""A parent's statuses after its cancel (a cancelled parent may be terminated since)."""
CANCELLED_CODE = f"child-{S.CANCELLED.label}"
"""The failure a parent still unwinding records for a child its cancel ended at once."""
NOT_STARTED = "not started"
STARTING = "starting"
START_FAILED = "failed to start"
REMOVED = "removed"
"""A started child whose row is gone: retention removes only ended instances."""
DONE_ORDER = (
    S.COMPLETED.label,
    S.FAILED.label,
    S.CANCELLED.label,
    S.TERMINATED.label,
    S.CONTINUED_AS_NEW.label,
    START_FAILED,
    NOT_STARTED,
    REMOVED,
)
"""The outcomes of a child that is done (it changes no more), in the summary's order."""
GOING_ORDER = (S.RUNNING.label, S.PAUSED.label, S.CANCELLING.label, S.FAILING.label, STARTING)
"""The outcomes of a child still going, in the summary's order."""
RECORDED = {C.SUCCEEDED: S.COMPLETED.label, C.FAILED: S.FAILED.label, C.START_FAILED: START_FAILED}
"""The outcome of a child whose end its parent recorded, when its own row is not read."""


@dataclass(frozen=True)
class FanOut:
    """The children of ``parent`` with, by child id, the status of each child instance
    that exists (``statuses``; None when the children were not read: each is then said
    from the parent's history alone)."""

    parent: Instance
    statuses: Mapping[str, InstanceStatus] | None = None

    @property
    def children(self) -> tuple[ChildProgress, ...]:
        return tuple(self.parent.children.values())

    def status_of(self, child: ChildProgress) -> InstanceStatus | None:
        """The child instance's own status (None when it was not read or does not exist)."""
        return (self.statuses or {}).get(child.child_id)

    def with_parent(self, child: ChildProgress) -> str:
        """``cancelled with its parent`` (``being cancelled`` while it unwinds) or
        ``terminated with its parent`` when the parent's own cancel or terminate ended
        the child, else ''. The cascade ends every child its parent still awaits
        (``active``; one its cancel ended at once while the parent unwound is recorded
        failed, ``child-cancelled``); a child whose own status says it ended otherwise
        was not ended by it."""
        parent, own = self.parent, self.status_of(child)
        if (
            child.status is C.ACTIVE
            and parent.status is S.TERMINATED
            and self._commanded(Action.TERMINATE)
            and own in (None, S.TERMINATED)
        ):
            return "terminated with its parent"
        reached = child.status is C.ACTIVE or (
            child.status is C.FAILED and child.code == CANCELLED_CODE
        )
        if (
            reached
            and parent.status in CANCELLED_WITH
            and self._commanded(Action.CANCEL)
            and own in (None, S.CANCELLING, S.CANCELLED)
        ):
            return f"{'being ' if own is S.CANCELLING else ''}cancelled with its parent"
        return ""

    def _commanded(self, action: Action) -> bool:
        return any(a.action == action for a in self.parent.audit)

    def said(self, child: ChildProgress) -> str:
        """What is true of a child beyond its status, '' when nothing is: ended with its
        parent; or, its parent having ended without ending it, ``no longer awaited``
        (a code run that returned before a run it spawned ended, a parent that failed)
        or ``not started`` (its start was still to come, and never comes), with why."""
        if ended := self.with_parent(child):
            return ended
        if child.status not in AWAITED or not self.parent.status.terminal:
            return ""
        what = "no longer awaited" if child.status is C.ACTIVE else NOT_STARTED
        return f"{what} ({ending(self.parent)})"

    def line(self, child: ChildProgress) -> str:
        """The child in words, as ``wayline inspect`` lists it: what is said of it, or
        its outcome (``completed``); a child no longer awaited with where it is now
        (``no longer awaited (the instance completed), now running``)."""
        said, label = self.said(child), self.label(child)
        started = child.status is C.ACTIVE and self.status_of(child) is not None
        if said and started and not self.with_parent(child):
            return f"{said}, now {label}"
        return said or label

    def outcome(self, child: ChildProgress) -> str:
        """Where the child is, one word or phrase of ``DONE_ORDER`` or ``GOING_ORDER``:
        its own status when read, else what its parent's history says."""
        own = self.status_of(child)
        if own is not None:
            return own.label
        if child.status in RECORDED:
            return RECORDED[child.status]
        if child.status is not C.ACTIVE:
            return NOT_STARTED if self.parent.status.terminal else STARTING
        return S.RUNNING.label if self.statuses is None else REMOVED

    def label(self, child: ChildProgress) -> str:
        """The outcome in words (``continued as new``)."""
        return _words(self.outcome(child))

    @property
    def counts(self) -> dict[str, int]:
        """How many children have each outcome, in the summary's order (none left out
        that is there, none listed that is not)."""
        found = Counter(self.outcome(c) for c in self.children)
        return {o: found[o] for o in (*DONE_ORDER, *GOING_ORDER) if found[o]}

    @property
    def done(self) -> int:
        """How many children change no more."""
        return sum(n for outcome, n in self.counts.items() if outcome in DONE_ORDER)

    @property
    def summary(self) -> str:
        """``children: 2 of 3 done (1 failed), 1 running`` ('' without children): the
        done ones other than completed in brackets, then those still going."""
        counts = self.counts
        if not counts:
            return ""
        ended = [f"{n} {_words(o)}" for o, n in counts.items() if o in DONE_ORDER[1:]]
        going = [f", {n} {_words(o)}" for o, n in counts.items() if o in GOING_ORDER]
        brackets = f" ({', '.join(ended)})" if ended else ""
        return f"children: {self.done} of {len(self.children)} done{brackets}{''.join(going)}"

    def to_json(self) -> dict[str, Any] | None:
        """The summary for JSON (the API, ``wayline inspect --json``): ``total``,
        ``done``, ``counts`` by outcome and the ``summary`` line; None without children."""
        if not self.children:
            return None
        return {
            "total": len(self.children),
            "done": self.done,
            "counts": self.counts,
            "summary": self.summary,
        }

    def child_json(self, child: ChildProgress) -> dict[str, Any]:
        """What the API adds to a child's entry: its own ``instance_status`` (null when
        it was never created), its ``outcome`` and what is ``said`` of it."""
        own = self.status_of(child)
        return {
            "instance_status": own.label if own is not None else None,
            "outcome": self.outcome(child),
            "said": self.said(child),
        }


def _words(label: str) -> str:
    return label.replace("_", " ")
