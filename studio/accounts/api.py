"""``/api/me``, ``/api/members``, ``/api/tokens``: who is asking, the team, its tokens."""

from __future__ import annotations

from typing import Annotated

from litestar import Request
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
from studio.rendering import principal_of, store_of


async def me(request: Request) -> MeOut:
    principal = principal_of(request)
    return MeOut(
        principal.actor,
        principal.team_id or None,
        principal.role.value if principal.role else None,
        "token" if principal.token else "session",
    )


async def list_members(request: Request) -> list[MemberOut]:
    principal = principal_of(request)
    return [member_out(m) for m in await accounts.members(store_of(request), principal.team_id)]


async def list_tokens(request: Request) -> list[TokenOut]:
    principal = principal_of(request)
    return [token_out(t) for t in await accounts.tokens(store_of(request), principal.team_id)]


async def create_token(
    request: Request, data: Annotated[TokenIn, examples.TOKEN]
) -> TokenCreatedOut:
    secret, token = await accounts.create_token(
        store_of(request), principal_of(request), data.label, data.role, data.expires_in_days
    )
    return TokenCreatedOut(secret, token_out(token))


async def revoke_token(request: Request, token_id: FromPath[str]) -> None:
    principal = principal_of(request)
    await accounts.revoke_token(store_of(request), principal.team_id, token_id)
