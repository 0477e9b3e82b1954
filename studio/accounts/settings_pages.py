"""The Settings page: the team's members, invitations and API tokens (managed by admins)."""

from __future__ import annotations

from typing import Any

from litestar import Request
from litestar.params import FromPath
from litestar.response import Redirect, Template

from studio.accounts import service as accounts
from studio.accounts.api_tokens import MAX_DAYS
from studio.accounts.people import MAX_DISPLAY_NAME
from studio.errors import Invalid
from studio.rendering import form_values, page, principal_of, see_other, store_of
from studio.roles import Access, Role


async def _settings(request: Request, status: int = 200, **extra: Any) -> Template:
    principal = principal_of(request)
    store = store_of(request)
    is_admin = principal.can(Access.ADMIN)
    return page(
        request,
        "settings/settings.html",
        "settings",
        status=status,
        members=await accounts.members(store, principal.team_id),
        tokens=await accounts.tokens(store, principal.team_id) if is_admin else [],
        invitations=await accounts.pending_invitations(store, principal.team_id)
        if is_admin
        else [],
        max_display_name=MAX_DISPLAY_NAME,
        roles=[r.value for r in Role],
        token_max_days=MAX_DAYS,
        **extra,
    )


async def settings_page(request: Request) -> Template:
    return await _settings(request)


async def invite_member(request: Request) -> Template:
    values = await form_values(request)
    try:
        invited = await accounts.invite_member(
            store_of(request),
            principal_of(request),
            values.get("username", ""),
            values.get("role", ""),
            values.get("display_name", ""),
        )
    except Invalid as invalid:
        return await _settings(request, 422, error=str(invalid))
    return await _settings(request, invited=invited)


async def withdraw_invitation(request: Request, invitation_id: FromPath[str]) -> Redirect:
    team = principal_of(request).team_id
    await accounts.withdraw_invitation(store_of(request), team, invitation_id)
    return see_other("/settings")


async def set_role(request: Request, user_id: FromPath[str]) -> Template | Redirect:
    values = await form_values(request)
    try:
        await accounts.set_role(
            store_of(request), principal_of(request), user_id, values.get("role", "")
        )
    except Invalid as invalid:
        return await _settings(request, 422, error=str(invalid))
    return see_other("/settings")


async def remove_member(request: Request, user_id: FromPath[str]) -> Template | Redirect:
    try:
        await accounts.remove_member(store_of(request), principal_of(request), user_id)
    except Invalid as invalid:
        return await _settings(request, 422, error=str(invalid))
    return see_other("/settings")


async def create_token(request: Request) -> Template:
    values = await form_values(request)
    try:
        secret, token = await accounts.create_token(
            store_of(request),
            principal_of(request),
            values.get("label", ""),
            values.get("role", ""),
            _days(values.get("expires_in_days", "")),
        )
    except Invalid as invalid:
        return await _settings(request, 422, error=str(invalid))
    return await _settings(request, new_token=secret, new_token_record=token)


def _days(value: str) -> int | None:
    """The form's token expiry in days; empty means never."""
    text = value.strip()
    if not text:
        return None
    if text.isascii() and text.isdigit() and len(text) <= len(str(MAX_DAYS)):
        return int(text)
    raise Invalid(f"a token expires in a whole number of days from 1 to {MAX_DAYS}, or never")


async def revoke_token(request: Request, token_id: FromPath[str]) -> Redirect:
    await accounts.revoke_token(store_of(request), principal_of(request).team_id, token_id)
    return see_other("/settings")
