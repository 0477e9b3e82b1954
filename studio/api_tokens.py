"""API tokens for CI and scripts: scoped to one team and one role, shown once.

A token is ``wl_<id>_<secret>``; only its sha256 is stored, so the studio can check a
token but never show it again. The id part lets people tell tokens apart in lists and
revoke one without having it. Requests with ``Authorization: Bearer <token>`` act in the
token's team with the token's role and need no CSRF token (browsers never send bearer
tokens on their own).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime

from engine.store.store import Store
from studio.roles import Role
from studio.sessions import secret_hash

PREFIX = "wl_"
MAX_LABEL = 100

CREATE = """
INSERT INTO studio_api_tokens (token_id, token_hash, team_id, role, label, created_by)
VALUES (%s, %s, %s, %s, %s, %s)
RETURNING created_at
"""
FIND = """
UPDATE studio_api_tokens SET last_used_at = now()
WHERE token_hash = %s AND revoked_at IS NULL
RETURNING token_id, team_id, role, label, created_by, created_at, last_used_at
"""
LIST = """
SELECT token_id, team_id, role, label, created_by, created_at, last_used_at
FROM studio_api_tokens WHERE team_id = %s AND revoked_at IS NULL ORDER BY created_at, token_id
"""
REVOKE = """
UPDATE studio_api_tokens SET revoked_at = now()
WHERE token_id = %s AND team_id = %s AND revoked_at IS NULL RETURNING 1
"""


class TokenRejected(ValueError):
    """A token request that cannot be done; the message says why."""


@dataclass(frozen=True)
class ApiToken:
    token_id: str
    team_id: str
    role: Role
    label: str
    created_by: str
    created_at: datetime
    last_used_at: datetime | None


async def create_token(
    store: Store, team_id: str, role: Role, label: str, created_by: str
) -> tuple[str, ApiToken]:
    """A new token; returns the secret (to show once) and its record."""
    label = label.strip()
    if not 1 <= len(label) <= MAX_LABEL:
        raise TokenRejected(f"a token needs a label of 1 to {MAX_LABEL} characters")
    token_id = secrets.token_hex(4)
    secret = f"{PREFIX}{token_id}_{secrets.token_urlsafe(32)}"
    role = Role(role)
    async with store.connection() as conn:
        row = await (
            await conn.execute(
                CREATE, (token_id, secret_hash(secret), team_id, role.value, label, created_by)
            )
        ).fetchone()
    return secret, ApiToken(token_id, team_id, role, label, created_by, row[0], None)


async def find_token(store: Store, secret: str) -> ApiToken | None:
    """The live token for a bearer value (and note its use), or None."""
    if not secret.startswith(PREFIX) or len(secret) > 128:
        return None
    async with store.connection() as conn:
        row = await (await conn.execute(FIND, (secret_hash(secret),))).fetchone()
    return None if row is None else _token(row)


async def list_tokens(store: Store, team_id: str) -> list[ApiToken]:
    async with store.connection() as conn:
        rows = await (await conn.execute(LIST, (team_id,))).fetchall()
    return [_token(row) for row in rows]


async def revoke_token(store: Store, team_id: str, token_id: str) -> bool:
    """Revoke a token of ``team_id``; False when there is no such live token there."""
    async with store.connection() as conn:
        return await (await conn.execute(REVOKE, (token_id, team_id))).fetchone() is not None


def _token(row: tuple) -> ApiToken:
    token_id, team_id, role, label, created_by, created_at, last_used_at = row
    return ApiToken(token_id, team_id, Role(role), label, created_by, created_at, last_used_at)
