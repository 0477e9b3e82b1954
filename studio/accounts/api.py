"""``/api/me``, ``/api/members``, ``/api/tokens``: who is asking, the team, its tokens."""

from __future__ import annotations

from typing import Annotated

from litestar.di import NamedDependency
from litestar.params import FromPath

from studio import api_examples as examples
from studio.accounts import service as accounts
from studio.accounts.schemas import (
    MemberOut,
    MeOut,
    TokenCreatedOut,
    TokenIn,
    TokenOut,
    member_out,
    token_out,
)
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
