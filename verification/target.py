"""The PostgreSQL a campaign runs against, and what the harness may do to it.

Drills run in fresh schemas on whatever server they are given. Drills that restart,
pause or kill the *server* may only run on a cluster the harness owns (an
``EmbeddedPostgres`` it started itself); on any other server they are reported as not
run, never as passed. ``Target.owned`` is that distinction; the server operations below
refuse to run without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psycopg

from engine.store.embedded import EmbeddedPostgres
from verification.standby import StandbyPair
from verification.threads import to_the_end

POLL_SECONDS = 0.02


class NotOwned(RuntimeError):
    """A drill needs a server the harness owns; this one is only borrowed."""


@dataclass
class Target:
    dsn: str
    server: EmbeddedPostgres | None = None
    standby: StandbyPair | None = None
    """A primary and standby the drill built (F1), ``dsn`` naming both."""

    @property
    def owned(self) -> bool:
        return self.server is not None

    def _owned_server(self) -> EmbeddedPostgres:
        if self.server is None:
            raise NotOwned("this drill restarts or pauses the server: it needs an owned cluster")
        return self.server

    def postmaster_pid(self) -> int:
        server = self._owned_server()
        return int((server.data_dir / "postmaster.pid").read_text().split()[0])

    def server_pids(self) -> list[int]:
        """The postmaster and every process it started (backends, checkpointer, ...)."""
        root = self.postmaster_pid()
        children = [pid for pid in _all_pids() if _parent(pid) == root]
        return [root, *children]

    async def restart_immediate(self, timeout: float = 30.0) -> float:
        """``pg_ctl stop -m immediate`` (SIGQUIT to the postmaster), then start; seconds down."""
        server = self._owned_server()
        pid = self.postmaster_pid()
        started = time.monotonic()
        os.kill(pid, signal.SIGQUIT)
        await _until(lambda: not Path(f"/proc/{pid}").exists(), timeout)
        await to_the_end(server.start)
        await wait_accepting(self.dsn, timeout)
        return time.monotonic() - started

    def pause(self) -> list[int]:
        """SIGSTOP the whole server (postmaster first, so it spawns nothing meanwhile)."""
        pids = self.server_pids()
        for pid in pids:
            _signal(pid, signal.SIGSTOP)
        return pids

    @staticmethod
    def resume(pids: list[int]) -> None:
        for pid in reversed(pids):
            _signal(pid, signal.SIGCONT)


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def _all_pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def _parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat[stat.rindex(")") + 2 :].split()[1])


async def _until(condition: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the server did not reach the awaited state")
        await asyncio.sleep(POLL_SECONDS)


async def wait_accepting(dsn: str, timeout: float) -> None:
    """Poll until the server accepts a connection and answers a query."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            async with await psycopg.AsyncConnection.connect(dsn, connect_timeout=2) as conn:
                await conn.execute("SELECT 1")
                return
        except psycopg.Error:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


async def terminate_backends(dsn: str, application_name: str) -> int:
    """``pg_terminate_backend`` every session named ``application_name``; how many."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        rows = await (
            await conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s AND pid <> pg_backend_pid()",
                (application_name,),
            )
        ).fetchall()
    return sum(1 for (done,) in rows if done)
