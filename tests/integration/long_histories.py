"""Long histories for the snapshot tests (issue 23), made the way workers make them.

The benchmark's builder (``bench.histories.build_history``) makes them: every step of a
step list started and finished in transitions of its own by the engine's pure core. They
are committed through the store a chunk at a time, so the store writes the snapshots of
the transitions that cross an interval, as it does for workers.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bench.histories import build_history
from engine.model.definitions import Definition
from engine.model.registry import Registry
from engine.model.transitions import Transition
from engine.store.store import Store

COMMIT_CHUNK = 100
"""Transitions per commit: what keeps building a long history quick."""


def long_history(
    definition: Definition,
    instance_id: str,
    now: datetime,
    input: Any = None,
    run_last: bool = True,
) -> list[Transition]:
    """The transitions of an instance whose steps all succeed in order, from ``now`` on;
    without ``run_last``, it stops with its last step scheduled (its work is due)."""
    registry = Registry([definition])
    return build_history(definition, registry, instance_id, now=now, input=input, run_last=run_last)


async def commit_history(store: Store, transitions: list[Transition]) -> None:
    for k in range(0, len(transitions), COMMIT_CHUNK):
        await store.commit_all(transitions[k : k + COMMIT_CHUNK])
