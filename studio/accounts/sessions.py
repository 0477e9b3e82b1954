"""Sign-in sessions: a random cookie value, kept server side only as its sha256.

A session names its user and the team they are working in, and carries the CSRF token
that every state-changing request of that session must echo (a form field or the
``X-CSRF-Token`` header htmx sends). A stolen database does not yield usable cookies,
and signing out deletes the row, so the cookie is dead at once.

A session id is never kept across a change of who may use it: signing in (or joining)
opens a new one and ends the one the browser sent, so a cookie value known before (one
planted in the browser, or left from an earlier sign-in) names nobody afterwards; a
password change ends every session of its person, the one it was made in too (its
cookie may be what leaked), and opens a new one for that browser.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

import psycopg

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
DELETE_ALL = "DELETE FROM studio_sessions WHERE user_id = %s"
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
    store: Store, user_id: str, team_id: str | None, ttl: timedelta, replaces: str = ""
) -> tuple[str, Session]:
    """A new session; returns the cookie value (shown to nobody else) and the session.

    ``replaces``: the cookie value the browser sent with the sign-in, whatever session
    it names (or none), which ends in the same transaction: the browser holds only the
    new value afterwards, and the old one must not outlive it elsewhere."""
    async with store.connection() as conn:
        if replaces:
            await conn.execute(DELETE, (secret_hash(replaces),))
        return await _open(conn, user_id, team_id, ttl)


async def renew_every_session(
    conn: psycopg.AsyncConnection, session: Session, ttl: timedelta
) -> tuple[str, Session]:
    """For a password change: end every session of ``session``'s person, this one too,
    and open a new one in its team for the browser that made the change (returned as
    ``create_session`` returns it), in the transaction of ``conn``, the one that sets
    the new password (``service.change_password``): the password and the sessions
    change together or not at all, so no old session outlives the old password."""
    await conn.execute(DELETE_ALL, (session.user_id,))
    return await _open(conn, session.user_id, session.team_id, ttl)


async def _open(
    conn: psycopg.AsyncConnection, user_id: str, team_id: str | None, ttl: timedelta
) -> tuple[str, Session]:
    token = secrets.token_urlsafe(32)
    csrf = secrets.token_urlsafe(32)
    digest = secret_hash(token)
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


async def switch_team(store: Store, session_hash: str, team_id: str) -> None:
    async with store.connection() as conn:
        await conn.execute(SWITCH_TEAM, (team_id, session_hash))
