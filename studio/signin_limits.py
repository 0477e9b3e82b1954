"""Rate limiting of sign-in attempts, per username and per client address.

Failures are recorded in PostgreSQL so the limit holds across restarts and across
several studio processes. Once a username (or a client) has ``limit`` failures inside
the window, further attempts are refused without checking the password, until the
oldest failure leaves the window; a successful sign-in clears the username's failures.
Refusing before hashing also keeps a password-guessing client from burning CPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

from engine.store.store import Store

RECENT_BY_USERNAME = """
SELECT count(*), min(failed_at) FROM studio_signin_failures
WHERE username = %s AND failed_at > now() - %s
"""
RECENT_BY_CLIENT = """
SELECT count(*), min(failed_at) FROM studio_signin_failures
WHERE client = %s AND failed_at > now() - %s
"""
RETRY_AFTER = "SELECT extract(epoch FROM (%s::timestamptz + %s) - now())"
RECORD = "INSERT INTO studio_signin_failures (username, client) VALUES (%s, %s)"
CLEAR = "DELETE FROM studio_signin_failures WHERE username = %s"
PURGE = "DELETE FROM studio_signin_failures WHERE failed_at <= now() - %s"


@dataclass(frozen=True)
class SignInLimits:
    per_username: int = 5
    per_client: int = 30
    window: timedelta = timedelta(minutes=15)


class SignInThrottled(Exception):
    """Too many failed attempts; ``retry_after`` is in whole seconds."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"too many failed sign-in attempts; try again in {retry_after} s")
        self.retry_after = retry_after


async def check_allowed(store: Store, limits: SignInLimits, username: str, client: str) -> None:
    """Raise SignInThrottled when either the username or the client is over its limit."""
    async with store.connection() as conn:
        for query, key, limit in (
            (RECENT_BY_USERNAME, username, limits.per_username),
            (RECENT_BY_CLIENT, client, limits.per_client),
        ):
            count, oldest = await (await conn.execute(query, (key, limits.window))).fetchone()
            if count >= limit:
                row = await (await conn.execute(RETRY_AFTER, (oldest, limits.window))).fetchone()
                raise SignInThrottled(max(1, math.ceil(float(row[0]))))


async def record_failure(store: Store, limits: SignInLimits, username: str, client: str) -> None:
    async with store.connection() as conn:
        await conn.execute(PURGE, (limits.window,))
        await conn.execute(RECORD, (username, client))


async def clear_failures(store: Store, username: str) -> None:
    async with store.connection() as conn:
        await conn.execute(CLEAR, (username,))
