"""A person's own account (password, current team) and a team's people and tokens.

Team management is for the team's admins: they invite people by username (an
invitation with a one-time code, the same answer whether the account exists or not,
see ``studio.accounts.invitations``), change roles and remove members, and issue or revoke API
tokens. An admin cannot remove or demote themselves, so a team always keeps the admin
who is acting. Every change to a member or an invitation is audited, with who made it
(``studio.accounts.account_audit``), and every member of the team may read that audit.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine import Store
from engine.model.limits import MAX_SEQUENCE
from studio.accounts import account_audit, api_tokens, invitations, people, sessions, signin_limits
from studio.accounts.account_audit import AccountPage
from studio.accounts.api_tokens import ApiToken, TokenRejected
from studio.accounts.invitations import Invitation
from studio.accounts.password_policy import PasswordRejected
from studio.accounts.passwords import hash_password, verify_password
from studio.accounts.people import Member, PeopleError
from studio.accounts.signin import Attempt
from studio.accounts.signin_limits import SignInThrottled
from studio.errors import Invalid, NotFound
from studio.principal import Principal
from studio.roles import Role


@dataclass(frozen=True)
class Invited:
    invitation: Invitation
    code: str
    """The one-time code, shown once to the admin to hand on."""


class PasswordGuessesThrottled(Invalid):
    """Too many wrong current passwords: said beside that field, answered 429."""

    status = 429

    def __init__(self, throttled: SignInThrottled) -> None:
        message = (
            "too many wrong current passwords; try again in "
            f"{throttled.retry_after} s (your password stays as it is)"
        )
        super().__init__(message, [{"path": "current", "message": message}])
        self.retry_after = throttled.retry_after


async def change_password(
    attempt: Attempt, principal: Principal, current: str, new: str, confirm: str
) -> str:
    """Set a new password after checking the current one; returns the cookie of a new
    session for this browser, since every session of the person ends, this one too
    (``sessions.renew_every_session``). A refusal names the field it concerns
    (``current``, ``new`` or ``confirm``).

    The new password, the end of every session and the new one are one transaction: a
    password stored while the sessions opened before it go on (the database lost in
    between) would leave whoever changed it believing that the old password's holders,
    and an attacker's session among them, were shut out.

    The current password is checked as a sign-in's is, under the same limits
    (``studio.accounts.signin_limits``, counted for this username from this address):
    the check is what keeps someone who holds a session, not the password, from
    taking the account over, so it must not be guessable without limit.
    PasswordGuessesThrottled when over a limit, before any check."""
    store = attempt.store
    user = principal.user
    if user is None or principal.session is None:
        raise Invalid("only people signed in with a password can change it")
    try:
        key = await attempt.reserve(user.username)
    except SignInThrottled as throttled:
        raise PasswordGuessesThrottled(throttled) from None
    found = await people.find_login(store, user.username)
    if found is None or not await verify_password(found[1], current):
        raise Invalid.at("current", "the current password is wrong")
    await signin_limits.succeeded(store, key, attempt.client)
    if new != confirm:
        raise Invalid.at("confirm", "the new password and its confirmation differ")
    if new == current:
        raise Invalid.at("new", "choose a password different from the current one")
    try:
        password_hash = await hash_password(new, user.username)
    except PasswordRejected as rejected:
        raise Invalid.at("new", str(rejected)) from None
    async with store.connection() as conn:
        await people.set_password(conn, user.user_id, password_hash)
        cookie, _ = await sessions.renew_every_session(conn, principal.session, attempt.ttl)
    return cookie


async def switch_team(store: Store, principal: Principal, team_id: str) -> None:
    if principal.session is None or not any(
        m.team.team_id == team_id for m in principal.memberships
    ):
        raise NotFound("you are not a member of that team")
    await sessions.switch_team(store, principal.session.session_hash, team_id)


async def members(store: Store, team: str) -> list[Member]:
    return await people.team_members(store, team)


async def invite_member(
    store: Store, principal: Principal, username: str, role: str, display_name: str = ""
) -> Invited:
    """Invite a username to the acting admin's team (see ``studio.accounts.invitations``).

    The answer never depends on whether the username has an account. A member of the
    team is refused (the members table the admin sees already names them): redeeming
    would set their role, so an admin could demote themselves, the one change of
    their own role ``set_role`` refuses, and leave the team without an admin.
    """
    role_value = _role(role)
    try:
        name = people.normalize_username(username)
        display = people.check_display_name(display_name)
    except PeopleError as error:
        raise Invalid(str(error)) from None
    await _not_a_member(store, principal, name)
    code, invitation = await invitations.invite(
        store, principal.team_id, name, display, role_value, principal.actor
    )
    return Invited(invitation, code)


async def pending_invitations(store: Store, team: str) -> list[Invitation]:
    return await invitations.pending(store, team)


async def withdraw_invitation(store: Store, principal: Principal, invitation_id: str) -> None:
    if not await invitations.withdraw(store, principal.team_id, invitation_id, principal.actor):
        raise NotFound("no such pending invitation in this team")


async def set_role(store: Store, principal: Principal, user_id: str, role: str) -> str:
    """Give a member ``role``, audited; returns their username, for the page to say who
    changed."""
    await _member(store, principal, user_id)
    if principal.user is not None and user_id == principal.user.user_id:
        raise Invalid("you cannot change your own role")
    changed = await people.change_role(
        store, principal.team_id, user_id, _role(role), principal.actor
    )
    if changed is None:  # removed meanwhile
        raise NotFound("no such member in this team")
    return changed[0]


async def remove_member(store: Store, principal: Principal, user_id: str) -> str:
    """Take a member out of the team, audited; returns their username, for the page to
    say who."""
    await _member(store, principal, user_id)
    if principal.user is not None and user_id == principal.user.user_id:
        raise Invalid("you cannot remove yourself from the team")
    removed = await people.remove_membership(store, user_id, principal.team_id, principal.actor)
    if removed is None:  # removed meanwhile
        raise NotFound("no such member in this team")
    return removed[0]


async def account_audit_page(
    store: Store, team: str, before: int | None = None, limit: int = account_audit.SHOWN
) -> AccountPage:
    """The team's audit of account actions, newest first (older than entry ``before``),
    with the invitations that lapsed and the tokens that expired since it was last read
    (``invitations.lapse``, ``api_tokens.record_expiries``)."""
    if before is not None and not 1 <= before <= MAX_SEQUENCE:  # a bigint, like the ids
        raise Invalid(f"before is an audit entry's id: a whole number from 1 to {MAX_SEQUENCE}")
    await invitations.lapse(store, team)
    await api_tokens.record_expiries(store, team)
    return await account_audit.page(store, team, before, limit)


async def tokens(store: Store, team: str) -> list[ApiToken]:
    return await api_tokens.list_tokens(store, team)


async def create_token(
    store: Store, principal: Principal, label: str, role: str, expires_in_days: int | None = None
) -> tuple[str, ApiToken]:
    """A token of the acting admin's team that works while that admin stays one (and,
    made with a token, while that token lives)."""
    try:
        return await api_tokens.create_token(
            store,
            principal.team_id,
            _role(role),
            label,
            principal.actor,
            principal.person_id,
            expires_in_days,
            made_with=principal.token,
        )
    except TokenRejected as rejected:
        raise Invalid(str(rejected)) from None


async def revoke_token(store: Store, principal: Principal, token_id: str) -> None:
    """Revoke a token of the acting admin's team, recording who did (see api_tokens)."""
    if not await api_tokens.revoke_token(store, principal.team_id, token_id, principal.actor):
        raise NotFound("no such token in this team")


async def _not_a_member(store: Store, principal: Principal, username: str) -> None:
    for member in await people.team_members(store, principal.team_id):
        if member.user.username == username:
            raise Invalid(
                f"{username} is already a member of this team, as {member.role.value}: "
                "change a member's role in the members table"
            )


async def _member(store: Store, principal: Principal, user_id: str) -> Member:
    for member in await people.team_members(store, principal.team_id):
        if member.user.user_id == user_id:
            return member
    raise NotFound("no such member in this team")


def _role(role: str) -> Role:
    try:
        return Role(role)
    except ValueError:
        raise Invalid(f"a role is one of {', '.join(r.value for r in Role)}") from None
