"""API tokens for CI and scripts: scoped to one team and one role, shown once.

A token is ``wl_<id>_<secret>``; only its sha256 is stored, so the studio can check a
token but never show it again. The id part lets people tell tokens apart in lists and
revoke one without having it. Requests with ``Authorization: Bearer <token>`` act in the
token's team with the token's role and need no CSRF token (browsers never send bearer
tokens on their own).

A token may expire (``expires_in_days``; none by default, as CI tokens usually live
long). It also stands for the admin who made it: it works only while that person (the
``creator_id``; for a token made with a token, that token's creator) is an admin of the
token's team. Demote them or remove them from the team and their tokens stop working at
once; make them admin again and the tokens work again, unless revoked meanwhile.

A token made with a token lives no longer than the token that made it: it expires when
that one does at the latest, and revoking a token revokes every token made with it (and
with those). Otherwise a leaked admin token, once revoked, would leave behind whatever
tokens were minted with it.

A revoked token stays listed, with when and by whom it was revoked: its id is the actor
(``token:<id>``) of every audit record it made, so a reviewer reading one must still
find what the token was, who made it and who stopped it. Making a token and revoking one
(each token a revocation takes with it) are also entries of the members audit
(``studio.accounts.account_audit``), written in the same transaction, by id and label.
So is a token's expiry, which happens in no transaction: the first read of the audit
after it records it (``record_expiries``), as an invitation's lapse is recorded.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from engine import Store
from studio.accounts import account_audit
from studio.accounts.account_audit import AccountAction
from studio.accounts.sessions import secret_hash
from studio.roles import Role

PREFIX = "wl_"
MAX_LABEL = 100
MAX_DAYS = 366
"""The longest expiry a token can be given, in days (a token may also never expire)."""

COLUMNS = (
    "token_id, team_id, role, label, created_by, creator_id, created_at, last_used_at, expires_at,"
    " revoked_at, revoked_by"
)
CREATOR_IS_ADMIN = """EXISTS (
    SELECT 1 FROM studio_memberships m
    WHERE m.user_id = t.creator_id AND m.team_id = t.team_id AND m.role = 'admin')"""
UNEXPIRED = "(t.expires_at IS NULL OR t.expires_at > now())"
CREATE = f"""
INSERT INTO studio_api_tokens AS t
    (token_id, token_hash, team_id, role, label, created_by, creator_id, expires_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, LEAST(now() + %s::interval, %s::timestamptz))
RETURNING {COLUMNS}, ''
"""
FIND = f"""
UPDATE studio_api_tokens t SET last_used_at = now()
WHERE token_hash = %s AND revoked_at IS NULL AND {UNEXPIRED} AND {CREATOR_IS_ADMIN}
RETURNING {COLUMNS}, ''
"""
LIST = f"""
SELECT {COLUMNS},
       CASE WHEN revoked_at IS NOT NULL THEN 'revoked'
            WHEN NOT {UNEXPIRED} THEN 'expired'
            WHEN NOT {CREATOR_IS_ADMIN} THEN 'its creator is no longer an admin of this team'
            ELSE '' END
FROM studio_api_tokens t WHERE team_id = %s
ORDER BY revoked_at IS NOT NULL, created_at, token_id
"""
"""Live tokens first, then the revoked ones (kept for the audit records they made)."""
MEMBER = "COALESCE((SELECT username FROM studio_users WHERE user_id = {creator}), {made_by})"
"""The member a token stands for, as its audit entries name them: their username, or
who made the token when no account is known (a token made before 0009 knew its
creator), since an entry always names someone."""
REVOKE = f"""
WITH RECURSIVE revoked AS (
    SELECT token_id FROM studio_api_tokens
    WHERE token_id = %s AND team_id = %s AND revoked_at IS NULL
    UNION
    SELECT t.token_id FROM studio_api_tokens t JOIN revoked r
        ON t.created_by = 'token:' || r.token_id
    WHERE t.revoked_at IS NULL
)
UPDATE studio_api_tokens t SET revoked_at = now(), revoked_by = %s FROM revoked r
WHERE t.token_id = r.token_id
RETURNING t.token_id, t.label, t.role, t.team_id,
          {MEMBER.format(creator="t.creator_id", made_by="t.created_by")}
"""
"""The token and every live token made with it, at any remove (``created_by``), each
with what its audit entry names (the member it stands for)."""
MEMBER_OF = "SELECT " + MEMBER.format(creator="%(creator)s", made_by="%(made_by)s")
EXPIRED = f"""
WITH expired AS (
    UPDATE studio_api_tokens t SET expiry_audited = true
    WHERE team_id = %s AND expires_at <= now() AND NOT expiry_audited
      AND (revoked_at IS NULL OR revoked_at > expires_at)
    RETURNING t.token_id, t.label, t.role, t.expires_at,
              {MEMBER.format(creator="t.creator_id", made_by="t.created_by")} AS member
)
SELECT * FROM expired ORDER BY expires_at, token_id
"""
"""The team's tokens that expired and whose expiry is not yet in the audit, each with
what its entry names, in the order they expired; marked, so that each is recorded
once. Not a token revoked before it expired: the revocation stopped it, and is its
entry."""


class TokenRejected(ValueError):
    """A token request that cannot be done; the message says why."""


@dataclass(frozen=True)
class ApiToken:
    """A team's API token as listed and checked: never the secret, which is shown once
    when made and stored only as a hash."""

    token_id: str
    team_id: str
    role: Role
    label: str
    created_by: str
    """Who made it, as audit fields name people: a username or ``token:<id>``."""
    creator_id: str
    """The user the token stands for: it works while they are an admin of its team."""
    created_at: datetime
    last_used_at: datetime | None
    expires_at: datetime | None
    revoked_at: datetime | None
    revoked_by: str
    """Who revoked it, as ``created_by`` names people (empty while it is not revoked;
    also for a token revoked before the studio kept who did)."""
    inactive: str = ""
    """Why the token does not work now (revoked, expired, its creator no longer an
    admin), or empty when it does."""


async def create_token(
    store: Store,
    team_id: str,
    role: Role,
    label: str,
    created_by: str,
    creator_id: str,
    expires_in_days: int | None = None,
    made_with: ApiToken | None = None,
) -> tuple[str, ApiToken]:
    """A new token; returns the secret (to show once) and its record. One ``made_with``
    a token expires when that token does at the latest (see the module)."""
    label = label.strip()
    if not 1 <= len(label) <= MAX_LABEL:
        raise TokenRejected(
            f"a token needs a label of 1 to {MAX_LABEL} characters, not {len(label)}"
        )
    if expires_in_days is not None and not 1 <= expires_in_days <= MAX_DAYS:
        raise TokenRejected(
            f"a token expires in 1 to {MAX_DAYS} days (or never), not in {expires_in_days}"
        )
    lifetime = None if expires_in_days is None else timedelta(days=expires_in_days)
    token_id = secrets.token_hex(4)
    secret = f"{PREFIX}{token_id}_{secrets.token_urlsafe(32)}"
    values = (token_id, secret_hash(secret), team_id, Role(role).value, label, created_by)
    async with store.connection() as conn:
        latest = made_with.expires_at if made_with else None
        row = await (await conn.execute(CREATE, (*values, creator_id, lifetime, latest))).fetchone()
        made = _token(row)
        found = {"creator": creator_id, "made_by": created_by}
        member = await (await conn.execute(MEMBER_OF, found)).fetchone()
        await account_audit.record(
            conn, team_id, created_by, AccountAction.TOKEN_CREATED, member[0],
            to_role=made.role, token=(made.token_id, made.label),
        )  # fmt: skip
    return secret, made


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


async def revoke_token(store: Store, team_id: str, token_id: str, revoked_by: str) -> bool:
    """Revoke a token of ``team_id`` and the tokens made with it, recording ``revoked_by``
    (an audit actor) on each; False when there is no such live token there."""
    async with store.connection() as conn:
        revoked = await (await conn.execute(REVOKE, (token_id, team_id, revoked_by))).fetchall()
        for revoked_id, label, role, team, member in revoked:
            await account_audit.record(
                conn, team, revoked_by, AccountAction.TOKEN_REVOKED, member,
                from_role=role, token=(revoked_id, label),
            )  # fmt: skip
    return bool(revoked)


async def record_expiries(store: Store, team_id: str) -> None:
    """Record each token of the team that expired in the members audit, dated when it
    expired, by ``account_audit.TIME_LIMIT``: an expiry happens in no transaction, so
    it is recorded by the first read of the audit after it, as an invitation's lapse is
    (``invitations.lapse``). Marking the token is what makes it recorded once, whoever
    reads at the same time: the second waits for the first's row locks and then finds
    the token marked."""
    async with store.connection() as conn:
        expired = await (await conn.execute(EXPIRED, (team_id,))).fetchall()
        for token_id, label, role, expired_at, member in expired:
            await account_audit.record(
                conn, team_id, account_audit.TIME_LIMIT, AccountAction.TOKEN_EXPIRED, member,
                from_role=role, token=(token_id, label), at=expired_at,
            )  # fmt: skip


def _token(row: tuple) -> ApiToken:
    token_id, team_id, role, *rest = row
    return ApiToken(token_id, team_id, Role(role), *rest)
