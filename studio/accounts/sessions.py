"""Sign-in sessions: a random cookie value, kept server side only as its sha256.

A session names its user and the team they are working in, and carries the CSRF token
that every state-changing request of that session must echo (a form field or the
``X-CSRF-Token`` header htmx sends). A stolen database does not yield usable cookies,
and signing out deletes the row, so the cookie is dead at once.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from engine import Store

COOKIE = "wayline_session"

CREATE = """
INSERT INTO studio_sessions (session_hash, user_id, team_id, csrf_token, expires_at)
VALUES (%s, %s, %s, %s, now() + %s)
RETURNING expires_at
"""
PURGE_EXPIRED = "DELETE FROM studio_sessions WHERE expires_at <= now()"
LOAD = """
SELECT user_id, team_id, csrf_token, expires_at FROM studio_sessions
WHERE session_hash = %s AND expires_at > now()
"""
DELETE = "DELETE FROM studio_sessions WHERE session_hash = %s"
DELETE_OTHERS = "DELETE FROM studio_sessions WHERE user_id = %s AND session_hash <> %s"
SWITCH_TEAM = "UPDATE studio_sessions SET team_id = %s WHERE session_hash = %s"


@dataclass(frozen=True)
class Session:
    """A signed-in browser session as stored: only the cookie's hash is kept (a copy of
    the table signs nobody in); ``csrf_token`` is what its forms must carry back."""

    session_hash: str
    user_id: str
    team_id: str | None
    csrf_token: str
    expires_at: datetime


def secret_hash(secret: str) -> str:
    """How cookie values and API tokens are stored and looked up."""
    return hashlib.sha256(secret.encode()).hexdigest()


async def create_session(
    store: Store, user_id: str, team_id: str | None, ttl: timedelta
) -> tuple[str, Session]:
    """A new session; returns the cookie value (shown to nobody else) and the session."""
    token = secrets.token_urlsafe(32)
    csrf = secrets.token_urlsafe(32)
    digest = secret_hash(token)
    async with store.connection() as conn:
        await conn.execute(PURGE_EXPIRED)
        row = await (await conn.execute(CREATE, (digest, user_id, team_id, csrf, ttl))).fetchone()
    return token, Session(digest, user_id, team_id, csrf, row[0])


async def load_session(store: Store, token: str) -> Session | None:
    """The live session for a cookie value, or None (unknown or expired)."""
    if not token or len(token) > 128:
        return None
    digest = secret_hash(token)
    async with store.connection() as conn:
        row = await (await conn.execute(LOAD, (digest,))).fetchone()
    return None if row is None else Session(digest, *row)


async def end_session(store: Store, session_hash: str) -> None:
    async with store.connection() as conn:
        await conn.execute(DELETE, (session_hash,))


async def end_other_sessions(store: Store, user_id: str, keep_hash: str) -> None:
    """After a password change: every other session of the user is signed out."""
    async with store.connection() as conn:
        await conn.execute(DELETE_OTHERS, (user_id, keep_hash))


async def switch_team(store: Store, session_hash: str, team_id: str) -> None:
    async with store.connection() as conn:
        await conn.execute(SWITCH_TEAM, (team_id, session_hash))
