"""The Settings page: the team's members, invitations and API tokens (managed by admins),
and the audit of what was done to its members and invitations, by whom and when (read by
every member, as instances' audit trails are)."""

from __future__ import annotations

from typing import Any

from litestar import Request
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery
from litestar.response import Redirect, Template

from studio.accounts import service as accounts
from studio.accounts.api_tokens import MAX_DAYS
from studio.accounts.people import MAX_DISPLAY_NAME
from studio.errors import Invalid
from studio.principal import Principal
from studio.rendering import form_values, page, see_other
from studio.roles import Access, Role
from studio.runtime import Runtime


async def _settings(
    request: Request,
    principal: Principal,
    runtime: Runtime,
    status: int = 200,
    audit_before: int | None = None,
    **extra: Any,
) -> Template:
    """The page; ``refused`` ('invite' or 'token') names the form whose ``error`` it is,
    shown beside that form with what was ``typed`` in it (it came back empty).
    ``audit_before``: the account audit shows the entries older than that one (a keyset
    page), else the newest."""
    extra.setdefault("refused", "")
    extra.setdefault("typed", {})
    store = runtime.store
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
        account_audit=await accounts.account_audit_page(store, principal.team_id, audit_before),
        max_display_name=MAX_DISPLAY_NAME,
        roles=[r.value for r in Role],
        token_max_days=MAX_DAYS,
        **extra,
    )


async def _refused(
    request: Request,
    principal: Principal,
    runtime: Runtime,
    invalid: Invalid,
    form: str = "",
    typed: dict[str, str] | None = None,
) -> Template:
    """The page again (422) saying why a change was refused: beside ``form``, filled with
    what was ``typed`` in it, for the two forms that take typing; else above the page."""
    return await _settings(
        request, principal, runtime, 422, error=str(invalid), refused=form, typed=typed or {}
    )


async def settings_page(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    audit_before: FromQuery[int | None] = None,
) -> Template:
    return await _settings(request, principal, runtime, audit_before=audit_before)


async def invite_member(
    request: Request, principal: NamedDependency[Principal], runtime: NamedDependency[Runtime]
) -> Template:
    values = await form_values(request)
    try:
        invited = await accounts.invite_member(
            runtime.store,
            principal,
            values.get("username", ""),
            values.get("role", ""),
            values.get("display_name", ""),
        )
    except Invalid as invalid:
        return await _refused(request, principal, runtime, invalid, "invite", values)
    return await _settings(request, principal, runtime, invited=invited)


async def withdraw_invitation(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    invitation_id: FromPath[str],
) -> Redirect:
    await accounts.withdraw_invitation(runtime.store, principal, invitation_id)
    return see_other("/settings")


async def set_role(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    user_id: FromPath[str],
) -> Template:
    values = await form_values(request)
    role = values.get("role", "")
    try:
        username = await accounts.set_role(runtime.store, principal, user_id, role)
    except Invalid as invalid:
        return await _refused(request, principal, runtime, invalid)
    return await _settings(request, principal, runtime, done=f"{username} is now {role}.")


async def remove_member(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    user_id: FromPath[str],
) -> Template:
    try:
        username = await accounts.remove_member(runtime.store, principal, user_id)
    except Invalid as invalid:
        return await _refused(request, principal, runtime, invalid)
    done = f"{username} is no longer a member of this team."
    return await _settings(request, principal, runtime, done=done)


async def create_token(
    request: Request, principal: NamedDependency[Principal], runtime: NamedDependency[Runtime]
) -> Template:
    values = await form_values(request)
    try:
        secret, token = await accounts.create_token(
            runtime.store,
            principal,
            values.get("label", ""),
            values.get("role", ""),
            _days(values.get("expires_in_days", "")),
        )
    except Invalid as invalid:
        return await _refused(request, principal, runtime, invalid, "token", values)
    return await _settings(request, principal, runtime, new_token=secret, new_token_record=token)


def _days(value: str) -> int | None:
    """The form's token expiry in days; empty means never."""
    text = value.strip()
    if not text:
        return None
    if text.isascii() and text.isdigit() and len(text) <= len(str(MAX_DAYS)):
        return int(text)
    raise Invalid(f"a token expires in a whole number of days from 1 to {MAX_DAYS}, or never")


async def revoke_token(
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    token_id: FromPath[str],
) -> Redirect:
    await accounts.revoke_token(runtime.store, principal, token_id)
    return see_other("/settings")
