"""Following running instances without loading the database.

Every open instance page that follows its instance registers here. One background
poll serves them all: each interval it reads the rows of every followed instance in
one primary-key query (sequence and status only, no history), and wakes the pages
whose instance moved past what they have shown. Only a woken page reads history, and
only the new events (``studio.instances.replays``). So an idle page costs one shared index
probe per interval, no page costs nothing at all (the poll stops when the last one
leaves), and the interval is a setting. A command made through this studio nudges the
poll so its page changes at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta

import psycopg

from engine import Queries, StoreError
from engine.model.instance import InstanceStatus

log = logging.getLogger("wayline.studio")


@dataclass(eq=False)
class Follower:
    """One page following one instance; ``known`` is the sequence it has shown."""

    instance_id: str
    known: int
    woken: asyncio.Event = field(default_factory=asyncio.Event)
    status: InstanceStatus | None = None

    async def wait(self, timeout: float) -> bool:
        """Wait until the instance moved on (True) or ``timeout`` seconds passed (False)."""
        try:
            await asyncio.wait_for(self.woken.wait(), timeout)
        except TimeoutError:
            return False
        self.woken.clear()
        return True


class InstanceWatcher:
    """The shared poll of the instances pages follow."""

    def __init__(self, queries: Queries, interval: timedelta) -> None:
        self.queries = queries
        self.interval = interval.total_seconds()
        self.polls = 0
        """Queries made so far (one per interval while anything is followed)."""
        self._followers: set[Follower] = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def following(self) -> int:
        return len(self._followers)

    @contextlib.asynccontextmanager
    async def follow(self, instance_id: str, known: int) -> AsyncIterator[Follower]:
        """Follow ``instance_id`` from sequence ``known`` for the duration of the block."""
        follower = Follower(instance_id, known)
        self._followers.add(follower)
        self.nudge()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._poll())
        try:
            yield follower
        finally:
            self._followers.discard(follower)

    def nudge(self) -> None:
        """Poll now instead of at the end of the interval (after a command from here)."""
        self._wake.set()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _poll(self) -> None:
        while self._followers:
            self._wake.clear()
            try:
                await self._check()
            except (StoreError, psycopg.Error, OSError):
                log.warning("following instances: the poll failed; trying again", exc_info=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval)

    async def _check(self) -> None:
        followers = list(self._followers)
        if not followers:
            return
        self.polls += 1
        rows = await self.queries.instance_rows({f.instance_id for f in followers})
        for follower in followers:
            row = rows.get(follower.instance_id)
            if row is None:
                continue
            follower.status = row.status
            if row.sequence > follower.known:
                follower.known = row.sequence
                follower.woken.set()
