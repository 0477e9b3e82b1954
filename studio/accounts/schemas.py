"""The JSON shapes of the accounts API: who is asking, the team's members and the audit
of what was done to them, API tokens."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from studio.accounts.account_audit import AccountEntry, AccountPage
from studio.accounts.api_tokens import ApiToken
from studio.accounts.people import Member
from studio.choices import AccountActionName, RoleName


@dataclass
class MeOut:
    actor: str
    team: str | None
    role: RoleName | None
    via: Literal["session", "token"]


@dataclass
class MemberOut:
    user_id: str
    username: str
    display_name: str
    role: RoleName


@dataclass
class TokenIn:
    label: str
    role: RoleName
    expires_in_days: int | None = None
    """Days until the token stops working; none (the default) for never."""


@dataclass
class TokenOut:
    id: str
    label: str
    role: RoleName
    created_by: str
    created_at: datetime
    last_used_at: datetime | None
    expires_at: datetime | None = None
    revoked_at: datetime | None = None
    revoked_by: str = ""
    """Who revoked it (a username or ``token:<id>``); a revoked token stays listed, since
    audit records name it as their actor."""
    inactive: str = ""
    """Why the token does not work now (revoked, expired, its creator no longer an admin)."""


@dataclass
class TokenCreatedOut:
    token: str
    """The secret: shown this once, stored only as a hash."""
    record: TokenOut


@dataclass
class AccountEntryOut:
    """One account action: who (``actor``) did what (``action``) to whom (``username``),
    from and to which role, and when."""

    id: int
    occurred_at: datetime
    actor: str
    """A username, ``token:<id>`` for an API token, ``cli`` for the command line,
    ``first start``, or ``time limit`` for an invitation that lapsed or a token that
    expired."""
    action: AccountActionName
    username: str
    """The member, the username invited, or the member a token stands for."""
    from_role: RoleName | None
    """The role before: a changed or removed member's, a withdrawn or lapsed invitation's,
    a revoked or expired token's."""
    to_role: RoleName | None
    """The role after: a changed member's, an invitation's, a new member's, a new token's."""
    token_id: str | None
    """The token made, revoked or expired (``wl_<id>_...``; never its secret); null
    otherwise."""
    token_label: str | None
    """That token's label; null otherwise."""


@dataclass
class AccountAuditOut:
    items: list[AccountEntryOut]
    """Newest first."""
    next_cursor: int | None
    """Pass as ``before`` for the older entries; null when there are none."""


def account_audit_out(found: AccountPage) -> AccountAuditOut:
    return AccountAuditOut([account_entry_out(e) for e in found.entries], found.before)


def account_entry_out(entry: AccountEntry) -> AccountEntryOut:
    return AccountEntryOut(
        entry.entry_id,
        entry.occurred_at,
        entry.actor,
        entry.action.value,
        entry.username,
        entry.from_role or None,
        entry.to_role or None,
        entry.token_id or None,
        entry.token_label if entry.token_id else None,
    )


def member_out(member: Member) -> MemberOut:
    user = member.user
    return MemberOut(user.user_id, user.username, user.display_name, member.role.value)


def token_out(token: ApiToken) -> TokenOut:
    return TokenOut(
        token.token_id,
        token.label,
        token.role.value,
        token.created_by,
        token.created_at,
        token.last_used_at,
        token.expires_at,
        token.revoked_at,
        token.revoked_by,
        token.inactive,
    )
