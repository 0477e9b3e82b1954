"""``/api/me``, ``/api/members``, ``/api/members/audit``, ``/api/tokens``: who is asking,
the team, what was done to its members and invitations (and by whom), its tokens."""

from __future__ import annotations

from typing import Annotated

from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery

from engine.model.limits import MAX_PAGE_ITEMS
from studio import api_examples as examples
from studio.accounts import account_audit
from studio.accounts import service as accounts
from studio.accounts.schemas import (
    AccountAuditOut,
    MemberOut,
    MeOut,
    TokenCreatedOut,
    TokenIn,
    TokenOut,
    account_audit_out,
    member_out,
    token_out,
)
from studio.errors import Invalid
from studio.principal import Principal
from studio.runtime import Runtime


async def me(principal: NamedDependency[Principal]) -> MeOut:
    return MeOut(
        principal.actor,
        principal.team_id or None,
        principal.role.value if principal.role else None,
        "token" if principal.token else "session",
    )


async def list_members(
    principal: NamedDependency[Principal], runtime: NamedDependency[Runtime]
) -> list[MemberOut]:
    return [member_out(m) for m in await accounts.members(runtime.store, principal.team_id)]


async def list_account_audit(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    before: FromQuery[int | None] = None,
    limit: FromQuery[int] = account_audit.SHOWN,
) -> AccountAuditOut:
    """Who invited whom, withdrew an invitation, changed a member's role or removed a
    member (and who joined, or was added from the command line), and when: newest first,
    ``limit`` at a time (1 to 100); ``before`` the previous page's ``next_cursor``."""
    if not 1 <= limit <= MAX_PAGE_ITEMS:
        raise Invalid(f"limit must be from 1 to {MAX_PAGE_ITEMS}")
    found = await accounts.account_audit_page(runtime.store, principal.team_id, before, limit)
    return account_audit_out(found)


async def list_tokens(
    principal: NamedDependency[Principal], runtime: NamedDependency[Runtime]
) -> list[TokenOut]:
    return [token_out(t) for t in await accounts.tokens(runtime.store, principal.team_id)]


async def create_token(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    data: Annotated[TokenIn, examples.TOKEN],
) -> TokenCreatedOut:
    secret, token = await accounts.create_token(
        runtime.store, principal, data.label, data.role, data.expires_in_days
    )
    return TokenCreatedOut(secret, token_out(token))


async def revoke_token(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    token_id: FromPath[str],
) -> None:
    await accounts.revoke_token(runtime.store, principal, token_id)
