"""The audit of account actions: who did what to a team's members, and when.

An instance's operator commands are audited in its history; what admins do to a team's
people is audited here (table ``studio_account_audit``, migrations 0035, 0038 and
0039): an invitation (to whom, with which role), its withdrawal or its lapse, a role
changed (from and to), a member removed (and the role they had), a person joining with
an invitation, a member added from the command line (``wayline user create --team``) or
by the studio's first start, and an API token made, revoked or expired (by its id and
label, never its secret; the member is the one the token stands for, and a revocation
records each token it takes with it). Each entry is written by the statement list that
makes the change, in its transaction (``record`` on the change's own connection), so a
change is never without its entry and an entry never names a change that did not
happen. A change that changes nothing (a role set to the role the member has) records
nothing.

An invitation lapses by itself, in no transaction of ours: the first read of the team's
people after it lapsed (its pending invitations, its audit, a new invitation) deletes it
and records the lapse in that transaction (``invitations.lapse``), dated when it lapsed,
by ``TIME_LIMIT``; its entry may so come after entries that are newer than it. A token
expires by itself too, and the first read of the team's audit after it records the
expiry the same way (``api_tokens.record_expiries``), unless the token was revoked
before.

The actor is named as every audit field names one (``Principal.actor``: a username, or
``token:<id>`` for an API token); the command line is named as everywhere it acts,
``cli`` (``engine.decide.audit.COMMAND_LINE_ACTOR``, a username nobody may take), and
the first start, a lapse and an expiry, which happen by no one's command, by a phrase
with a space (``FIRST_START``, ``TIME_LIMIT``), which no username can be. Every member
of the team may read the team's entries (a reviewer needs no admin role): the Settings
page shows the newest, ``GET /api/members/audit`` pages through all of them, newest
first.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

import psycopg

from engine import Store
from engine.model.limits import MAX_PAGE_ITEMS
from studio.roles import Role

FIRST_START = "first start"
"""The actor of the first admin the studio's first start creates."""
TIME_LIMIT = "time limit"
"""The actor of an invitation that lapsed unused (``invitations.VALID_FOR``) and of a
token that expired."""
SHOWN = 50
"""Entries the Settings page shows (the API pages through the rest)."""


class AccountAction(StrEnum):
    INVITED = "invited"
    INVITATION_WITHDRAWN = "invitation_withdrawn"
    INVITATION_EXPIRED = "invitation_expired"
    JOINED = "joined"
    ADDED = "added"
    ROLE_CHANGED = "role_changed"
    REMOVED = "removed"
    TOKEN_CREATED = "token_created"
    TOKEN_REVOKED = "token_revoked"
    TOKEN_EXPIRED = "token_expired"

    @property
    def words(self) -> str:
        """What the Settings page says for it."""
        return self.value.replace("_", " ")


COLUMNS = (
    "entry_id, team_id, occurred_at, actor, action, username, from_role, to_role, token_id,"
    " token_label"
)
RECORD = """
INSERT INTO studio_account_audit
    (team_id, occurred_at, actor, action, username, from_role, to_role, token_id, token_label)
VALUES (%(team)s, COALESCE(%(at)s::timestamptz, now()), %(actor)s, %(action)s, %(username)s,
        %(from_role)s, %(to_role)s, %(token_id)s, %(token_label)s)
"""
PAGE = f"""
SELECT {COLUMNS} FROM studio_account_audit
WHERE team_id = %(team)s AND (%(before)s::bigint IS NULL OR entry_id < %(before)s)
ORDER BY entry_id DESC
LIMIT %(limit)s
"""
"""A team's entries before an entry, newest first (``studio_account_audit_team_idx``)."""


@dataclass(frozen=True)
class AccountEntry:
    """One account action, as recorded when it was made."""

    entry_id: int
    team_id: str
    occurred_at: datetime
    actor: str
    """Who did it, as audit fields name people: a username, ``token:<id>``, ``cli``
    (the command line), or one of ``FIRST_START`` and ``TIME_LIMIT``."""
    action: AccountAction
    username: str
    """The member, or the username invited."""
    from_role: str
    """The role before ('' for an invitation, a join or an addition)."""
    to_role: str
    """The role after ('' for a removal or a withdrawn invitation)."""
    token_id: str = ""
    """The API token made, revoked or expired (``wl_<id>_...``); '' for the other
    actions."""
    token_label: str = ""
    """That token's label."""


@dataclass(frozen=True)
class AccountPage:
    entries: list[AccountEntry]
    before: int | None
    """Where the next (older) page starts, or None when there is none."""


async def record(
    conn: psycopg.AsyncConnection,
    team_id: str,
    actor: str,
    action: AccountAction,
    username: str,
    from_role: Role | str = "",
    to_role: Role | str = "",
    token: tuple[str, str] = ("", ""),
    at: datetime | None = None,
) -> None:
    """Record ``action`` in the transaction of ``conn``, the one that makes the change:
    ``token`` is the id and label of the token it concerns, ``at`` when it happened
    (now when None: a lapse is recorded after it happened)."""
    await conn.execute(
        RECORD,
        {
            "team": team_id,
            "at": at,
            "actor": actor,
            "action": AccountAction(action).value,
            "username": username,
            "from_role": _role(from_role),
            "to_role": _role(to_role),
            "token_id": token[0],
            "token_label": token[1],
        },
    )


async def page(
    store: Store, team_id: str, before: int | None = None, limit: int = SHOWN
) -> AccountPage:
    """The team's entries older than entry ``before`` (from the newest when None), newest
    first, at most ``limit`` (1 to MAX_PAGE_ITEMS)."""
    if not 1 <= limit <= MAX_PAGE_ITEMS:
        raise ValueError(f"limit must be from 1 to {MAX_PAGE_ITEMS}")
    params = {"team": team_id, "before": before, "limit": limit + 1}
    async with store.connection() as conn:
        rows = await (await conn.execute(PAGE, params)).fetchall()
    entries = [_entry(row) for row in rows[:limit]]
    more = len(rows) > limit
    return AccountPage(entries, entries[-1].entry_id if more else None)


def _role(role: Role | str) -> str:
    return Role(role).value if role else ""


def _entry(row: tuple) -> AccountEntry:
    entry_id, team_id, occurred_at, actor, action, *rest = row
    return AccountEntry(entry_id, team_id, occurred_at, actor, AccountAction(action), *rest)
