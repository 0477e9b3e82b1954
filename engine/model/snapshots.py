"""A snapshot as it is stored: plain data, so that a ``Transition`` can carry the one it
writes (``Transition.snapshot``). What a snapshot is, when one is due, how it is made and
when it may be trusted is ``engine.replay.snapshots``; writing and reading it is
``engine.store.snapshots``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Snapshot:
    """One instance's replayed state at ``sequence``, as stored."""

    instance_id: str
    sequence: int
    fold_version: int
    """The ``engine.replay.snapshots.FOLD_VERSION`` that wrote it."""
    digest: str
    """SHA-256 of ``state``, checked when it is restored."""
    state: str
    """The state as lines of canonical JSON (``engine.replay.snapshots.encode``)."""
