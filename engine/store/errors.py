"""What a store operation can report, classified so callers know what is safe.

Every mutation that fails says whether its effect is NOT_COMMITTED (safe to retry the
same transition), COMMITTED, or UNKNOWN (the COMMIT was sent and no answer came:
reconcile the transition id before anything else). Messages carry no driver text,
credentials or payload bytes; the driver's exception stays chained as ``__cause__``.
"""

from __future__ import annotations

from enum import StrEnum

from engine.model.errors import WaylineError


class CommitOutcome(StrEnum):
    NOT_COMMITTED = "not_committed"
    COMMITTED = "committed"
    UNKNOWN = "unknown"


class Reconciliation(StrEnum):
    """What the idempotency ledger says about a transition id."""

    MISSING = "missing"
    COMMITTED = "committed"
    CONFLICTING = "conflicting"


class StoreError(WaylineError):
    """A store operation failed; ``outcome`` says whether anything was written."""

    outcome = CommitOutcome.NOT_COMMITTED

    def __init__(self, message: str, outcome: CommitOutcome | None = None) -> None:
        super().__init__(message)
        if outcome is not None:
            self.outcome = outcome


class StoreUnavailable(StoreError):
    """The database could not be reached or did not answer in time."""


class CannotConnect(StoreUnavailable):
    """No connection to the database could be opened: a wrong address, user, password
    or database name, or a server that is down. Nothing was tried. The driver's error,
    whose text can quote the address and the user, stays the ``__cause__``."""

    def __init__(self, message: str = "cannot connect to the database") -> None:
        super().__init__(message)


class CommitUnknown(StoreError):
    """The COMMIT's outcome is unknown; reconcile the transition id before retrying."""

    outcome = CommitOutcome.UNKNOWN


class SequenceConflict(StoreError):
    """Another transition moved the instance first; reload and decide again."""


class StartVersionMoved(StoreError):
    """A ``latest_only`` start's version is no longer the latest active one of its
    definition (one was published or it was deprecated): nothing was written."""


class DuplicateTransition(StoreError):
    """The transition id was already committed with other content: of ``instance_id``'s
    ledger, when the statement that found it knew which ('' when settling a COMMIT)."""

    def __init__(self, message: str, instance_id: str = "") -> None:
        super().__init__(message)
        self.instance_id = instance_id


class InstanceNotFound(StoreError):
    """No instance has this id (in this schema)."""


class InstanceExists(StoreError):
    """An instance with this id was already started by another transition."""


class ActiveExecutionExists(StoreError):
    """Another active instance of the definition holds the start's parent key (a
    machine's one active execution per parent); ``active_id`` names it."""

    def __init__(self, message: str, active_id: str) -> None:
        super().__init__(message)
        self.active_id = active_id


class StaleLease(StoreError):
    """The lease is no longer this owner's (expired, reclaimed, or finished)."""


class CorruptStore(StoreError):
    """Rows violate the model (a gap in history, an unknown kind): stop, do not guess."""


class HistoryLimitExceeded(StoreError):
    """The history is longer than an inspection may read."""
