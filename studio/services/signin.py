"""Signing in and out, with rate limiting and password rehashing."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from engine.store.store import Store
from studio import people, sessions, signin_limits
from studio.passwords import needs_rehash, rehash_password, verify_password
from studio.people import User
from studio.sessions import Session
from studio.signin_limits import SignInLimits


class SignInFailed(Exception):
    """Wrong username or password (deliberately not saying which)."""


@dataclass(frozen=True)
class SignedIn:
    cookie: str
    session: Session
    user: User


async def sign_in(
    store: Store,
    limits: SignInLimits,
    ttl: timedelta,
    username: str,
    password: str,
    client: str,
) -> SignedIn:
    """Check the password (unless throttled) and open a session in the user's first team.

    Raises SignInThrottled before any password check when over a limit, and
    SignInFailed for a wrong username or password. The attempt is reserved (counted as
    a failure) before the check, so concurrent attempts cannot overrun the limits.
    """
    key = username.strip().lower()[:100]
    await signin_limits.reserve(store, limits, key, client)
    found = await people.find_login(store, username)
    if not await verify_password(found[1] if found else None, password) or found is None:
        raise SignInFailed("wrong username or password")
    user, stored_hash = found
    await signin_limits.succeeded(store, key, client)
    if needs_rehash(stored_hash):
        await people.store_rehash(
            store, user.user_id, await rehash_password(password), user.must_change_password
        )
    teams = await people.memberships(store, user.user_id)
    team = teams[0].team.team_id if teams else None
    cookie, session = await sessions.create_session(store, user.user_id, team, ttl)
    return SignedIn(cookie, session, user)


async def sign_out(store: Store, session: Session) -> None:
    await sessions.end_session(store, session.session_hash)
