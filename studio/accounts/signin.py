"""Signing in and out (and joining a team by invitation), with rate limiting and
password rehashing."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from engine import Store
from studio.accounts import invitations, people, sessions, signin_limits
from studio.accounts.account_audit import AccountAction
from studio.accounts.invitations import Invitation
from studio.accounts.password_policy import PasswordRejected
from studio.accounts.passwords import needs_rehash, rehash_password, verify_password
from studio.accounts.people import PeopleError, User
from studio.accounts.sessions import Session
from studio.accounts.signin_limits import SignInLimits


class SignInFailed(Exception):
    """Wrong username or password (deliberately not saying which)."""


class JoinFailed(Exception):
    """An invitation code that does not fit, or a wrong password; the message says so."""


CODE_DOES_NOT_FIT = (
    "the invitation code does not fit that username (a code works once, for "
    f"{invitations.VALID_FOR.days} days; ask your admin for a new one if it was used or "
    "lapsed), or the password is wrong"
)
"""Not saying which, nor whether the account or the invitation exists; but a used or
lapsed code is the likely reason once the code was pasted whole, so it says what to do."""


class JoinRejected(Exception):
    """The account an invitation would create is not acceptable; the message says why."""


@dataclass(frozen=True)
class SignedIn:
    """A session just opened: the cookie to set, the session it names and whose it is
    (the page decides where to go from ``user``)."""

    cookie: str
    session: Session
    user: User


@dataclass(frozen=True)
class Attempt:
    """Where a sign-in or a join comes from and what bounds it: the store, the studio's
    limits and session lifetime, the client's address the limits count by, and the
    session cookie the browser sent (``''``: none), which the session it opens replaces."""

    store: Store
    limits: SignInLimits
    ttl: timedelta
    client: str
    cookie: str = ""

    async def reserve(self, username: str) -> str:
        """Count the attempt before any password is checked; returns its key."""
        key = signin_limits.attempt_key(username)
        await signin_limits.reserve(self.store, self.limits, key, self.client)
        return key


async def sign_in(attempt: Attempt, username: str, password: str) -> SignedIn:
    """Check the password (unless throttled) and open a session in the user's first team.

    Raises SignInThrottled before any password check when over a limit, and
    SignInFailed for a wrong username or password. The attempt is reserved (counted as
    a failure) before the check, so concurrent attempts cannot overrun the limits.
    """
    store = attempt.store
    key = await attempt.reserve(username)
    found = await people.find_login(store, username)
    if not await verify_password(found[1] if found else None, password) or found is None:
        raise SignInFailed("wrong username or password")
    user, stored_hash = found
    await signin_limits.succeeded(store, key, attempt.client)
    if needs_rehash(stored_hash):
        await people.store_rehash(
            store, user.user_id, await rehash_password(password), user.must_change_password
        )
    teams = await people.memberships(store, user.user_id)
    return await _open(attempt, user, teams[0].team.team_id if teams else None)


async def join(attempt: Attempt, username: str, code: str, password: str) -> SignedIn:
    """Redeem an invitation: become a member of its team and sign in, working there.

    With an account of that name, ``password`` must be its password; without one, it
    becomes the password of the account this creates. The attempt counts like a sign-in
    (it checks a password, and a code can be guessed). Raises SignInThrottled,
    JoinFailed (code or password wrong, not saying which) or JoinRejected (the new
    account's password or name is not acceptable; the message says why).
    """
    store = attempt.store
    key = await attempt.reserve(username)
    name = key if people.USERNAME.fullmatch(key) else ""
    invitation = await invitations.find(store, name, code) if name else None
    found = await people.find_login(store, name) if name else None
    password_ok = await verify_password(found[1] if found else None, password)
    if invitation is None or (found is not None and not password_ok):
        raise JoinFailed(CODE_DOES_NOT_FIT)
    await signin_limits.succeeded(store, key, attempt.client)
    user = found[0] if found else await _create(store, invitation, password)
    if not await invitations.take(store, invitation):
        raise JoinFailed("that invitation was used or withdrawn meanwhile")
    await people.set_membership(
        store,
        user.user_id,
        invitation.team_id,
        invitation.role,
        user.username,
        added=AccountAction.JOINED,
        keep_role=True,  # see set_membership: an invitation never changes a member's role
    )
    return await _open(attempt, user, invitation.team_id)


async def _create(store: Store, invitation: Invitation, password: str) -> User:
    try:
        return await people.create_user(
            store, invitation.username, password, invitation.display_name
        )
    except (PasswordRejected, PeopleError) as rejected:
        raise JoinRejected(str(rejected)) from None


async def _open(attempt: Attempt, user: User, team: str | None) -> SignedIn:
    """A new session, never the one the browser had: that one ends (``create_session``)."""
    cookie, session = await sessions.create_session(
        attempt.store, user.user_id, team, attempt.ttl, replaces=attempt.cookie
    )
    return SignedIn(cookie, session, user)


async def sign_out(store: Store, session: Session) -> None:
    await sessions.end_session(store, session.session_hash)
