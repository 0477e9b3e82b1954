"""D5's blocking handler waits until no transaction of the fencing oracle is open in its
process: one open would keep its work row locked for the whole block, and no other
worker could take the lease over (``verification.lease_audit.until_no_wrapped_write``)."""

from __future__ import annotations

import asyncio

from verification import lease_audit


async def test_the_wait_returns_at_once_when_no_wrapped_write_is_open() -> None:
    await asyncio.wait_for(lease_audit.until_no_wrapped_write(), timeout=5)


async def test_the_wait_lasts_while_a_wrapped_write_is_open() -> None:
    with lease_audit.wrapped_write():
        waiting = asyncio.create_task(lease_audit.until_no_wrapped_write())
        for _ in range(20):  # many poll rounds: it must still be waiting
            await asyncio.sleep(lease_audit.WRAPPED_POLL_SECONDS)
        assert not waiting.done()
    await asyncio.wait_for(waiting, timeout=5)
