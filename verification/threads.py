"""Blocking calls of the harness (a schema migrated, a cluster started) in a thread,
awaited to their end even when the drill is stopped meanwhile.

``asyncio.to_thread`` gives up its await at once when cancelled, but the thread cannot be
stopped: a schema it was migrating appeared after the drill had dropped it, a cluster it
was starting ran on with no one to stop it. A stopped drill waits for the call instead,
and undoes what it made (``undo``) when nothing else will, then stops.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def to_the_end(
    call: Callable[..., T], *args: Any, undo: Callable[[T], object] | None = None
) -> T:
    """``call(*args)`` in a thread; cancelled, it still ends (and ``undo`` runs on what it
    made) before the cancellation goes on."""
    running = asyncio.ensure_future(asyncio.to_thread(call, *args))
    try:
        return await asyncio.shield(running)
    except asyncio.CancelledError:
        await asyncio.wait([running])
        if undo is not None and not running.cancelled() and running.exception() is None:
            await asyncio.to_thread(undo, running.result())
        raise
