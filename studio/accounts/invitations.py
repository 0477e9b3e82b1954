"""Invitations: how an admin adds a person to a team without learning who exists.

An admin invites a *username* with a role. The answer is the same whether an account of
that name exists or not: a one-time code (shown once, stored as its sha256) that the
admin hands to the person, and a pending invitation in the team's list. The person
redeems the code at ``/login/join``: with their password when they have an account,
or by choosing one, which creates it. Only then do they become a member.

An invitation lasts ``VALID_FOR``; inviting the same username again replaces it, and
an admin can withdraw it. Redeeming deletes it, so a code works once. Inviting and
withdrawing are audited (``studio.accounts.account_audit``) in their own transactions;
a lapse, which happens in none, is audited by the first read of the team's invitations
or members audit after it (``lapse``), which deletes the lapsed invitation.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

import psycopg

from engine import Store
from studio.accounts import account_audit
from studio.accounts.account_audit import AccountAction
from studio.accounts.sessions import secret_hash
from studio.roles import Role

VALID_FOR = timedelta(days=7)
MAX_CODE = 64
"""A longer code is no code of ours; it is not looked up."""

COLUMNS = "invitation_id, team_id, username, display_name, role, created_by, created_at, expires_at"
REPLACE = "DELETE FROM studio_invitations WHERE team_id = %s AND username = %s"
CREATE = f"""
INSERT INTO studio_invitations
    (invitation_id, code_hash, team_id, username, display_name, role, created_by, expires_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, now() + %s)
RETURNING {COLUMNS}
"""
LIST = f"""
SELECT {COLUMNS} FROM studio_invitations WHERE team_id = %s AND expires_at > now()
ORDER BY created_at, invitation_id
"""
FIND = f"""
SELECT {COLUMNS} FROM studio_invitations
WHERE code_hash = %s AND username = %s AND expires_at > now()
"""
TAKE = "DELETE FROM studio_invitations WHERE invitation_id = %s RETURNING 1"
LAPSED = """
DELETE FROM studio_invitations WHERE team_id = %s AND expires_at <= now()
RETURNING username, role, expires_at
"""
WITHDRAW = """
DELETE FROM studio_invitations WHERE invitation_id = %s AND team_id = %s
RETURNING username, role
"""


@dataclass(frozen=True)
class Invitation:
    """An open invitation to join a team with a role; its code is stored only as a hash
    and lapses at ``expires_at``, so an old code in a chat log opens nothing."""

    invitation_id: str
    team_id: str
    username: str
    display_name: str
    """Given to the account when the invitation creates it."""
    role: Role
    created_by: str
    created_at: datetime
    expires_at: datetime


async def invite(
    store: Store, team_id: str, username: str, display_name: str, role: Role, created_by: str
) -> tuple[str, Invitation]:
    """A new invitation (replacing one for the same username), audited as made by
    ``created_by``; returns its code too."""
    code = secrets.token_urlsafe(18)
    values = (secrets.token_hex(6), secret_hash(code), team_id, username, display_name)
    async with store.connection() as conn:
        await _lapse(conn, team_id)  # a lapsed one replaced is recorded as lapsed first
        await conn.execute(REPLACE, (team_id, username))
        row = await (
            await conn.execute(CREATE, (*values, Role(role).value, created_by, VALID_FOR))
        ).fetchone()
        await account_audit.record(
            conn, team_id, created_by, AccountAction.INVITED, username, to_role=role
        )
    return code, _invitation(row)


async def pending(store: Store, team_id: str) -> list[Invitation]:
    """The team's invitations still open (those that lapsed are recorded so, ``lapse``)."""
    async with store.connection() as conn:
        await _lapse(conn, team_id)
        rows = await (await conn.execute(LIST, (team_id,))).fetchall()
    return [_invitation(row) for row in rows]


async def lapse(store: Store, team_id: str) -> None:
    """Record each invitation of the team that lapsed unused in the members audit, dated
    when it lapsed, by ``account_audit.TIME_LIMIT``, and delete it: a lapse happens in no
    transaction, so it is recorded by the first look at the team's people after it.
    Deleting is what makes it recorded once, whoever looks at the same time."""
    async with store.connection() as conn:
        await _lapse(conn, team_id)


async def _lapse(conn: psycopg.AsyncConnection, team_id: str) -> None:
    for username, role, lapsed_at in await (await conn.execute(LAPSED, (team_id,))).fetchall():
        await account_audit.record(
            conn, team_id, account_audit.TIME_LIMIT, AccountAction.INVITATION_EXPIRED,
            username, role, at=lapsed_at,
        )  # fmt: skip


async def find(store: Store, username: str, code: str) -> Invitation | None:
    """The live invitation of ``username`` with this code, or None."""
    if not code or len(code) > MAX_CODE:
        return None
    async with store.connection() as conn:
        row = await (await conn.execute(FIND, (secret_hash(code.strip()), username))).fetchone()
    return None if row is None else _invitation(row)


async def take(store: Store, invitation: Invitation) -> bool:
    """Use the invitation up; False when it was used (or withdrawn) meanwhile."""
    async with store.connection() as conn:
        return await (await conn.execute(TAKE, (invitation.invitation_id,))).fetchone() is not None


async def withdraw(store: Store, team_id: str, invitation_id: str, actor: str) -> bool:
    """Withdraw a pending invitation of ``team_id``, audited as done by ``actor``; False
    when there is none."""
    async with store.connection() as conn:
        found = await (await conn.execute(WITHDRAW, (invitation_id, team_id))).fetchone()
        if found is not None:
            username, role = found
            await account_audit.record(
                conn, team_id, actor, AccountAction.INVITATION_WITHDRAWN, username, role
            )
    return found is not None


def _invitation(row: tuple) -> Invitation:
    invitation_id, team_id, username, display_name, role, *rest = row
    return Invitation(invitation_id, team_id, username, display_name, Role(role), *rest)
