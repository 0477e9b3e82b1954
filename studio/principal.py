"""Who is making a request, in which team, with which role.

A request is made by a signed-in person (session cookie) or by a script holding an API
token (``Authorization: Bearer``). Either way it acts in exactly one team with one role;
every read and action below goes through ``Principal.team_id``.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine import Store
from studio.accounts import api_tokens, people, sessions
from studio.accounts.api_tokens import ApiToken
from studio.accounts.people import Membership, Team, User
from studio.accounts.sessions import Session
from studio.roles import Access, Role, allows

BEARER = "bearer "


@dataclass(frozen=True)
class Principal:
    """Who is acting, in which team and with which role: read once per request from the
    session cookie or the API token, so no route works out access on its own."""

    actor: str
    """What audit fields record: the username, or ``token:<id>`` for an API token."""
    team: Team | None
    role: Role | None
    user: User | None = None
    memberships: tuple[Membership, ...] = ()
    session: Session | None = None
    token: ApiToken | None = None

    @property
    def team_id(self) -> str:
        return self.team.team_id if self.team else ""

    @property
    def person_id(self) -> str:
        """The user acting: the signed-in person, or the creator a token stands for."""
        if self.user is not None:
            return self.user.user_id
        return self.token.creator_id if self.token else ""

    @property
    def must_change_password(self) -> bool:
        return self.user is not None and self.user.must_change_password

    @property
    def csrf_token(self) -> str:
        return self.session.csrf_token if self.session else ""

    def can(self, access: str) -> bool:
        """Whether this principal's role grants ``access`` (for showing controls)."""
        return allows(self.role, Access(access))


async def from_bearer(store: Store, authorization: str) -> Principal | None:
    """The principal of an ``Authorization: Bearer <token>`` header, or None."""
    if not authorization.lower().startswith(BEARER):
        return None
    token = await api_tokens.find_token(store, authorization[len(BEARER) :].strip())
    if token is None:
        return None
    return Principal(
        f"token:{token.token_id}", Team(token.team_id, token.team_id), token.role, token=token
    )


async def from_session(store: Store, cookie: str) -> Principal | None:
    """The principal of a session cookie, or None when it is unknown or expired.

    The session's team is used while the user is still a member of it; otherwise their
    first team (or none: such a person can only see their account page).
    """
    session = await sessions.load_session(store, cookie)
    if session is None:
        return None
    user = await people.get_user(store, session.user_id)
    if user is None:
        return None
    teams = tuple(await people.memberships(store, user.user_id))
    current = next((m for m in teams if m.team.team_id == session.team_id), None)
    current = current or (teams[0] if teams else None)
    return Principal(
        user.username,
        current.team if current else None,
        current.role if current else None,
        user,
        teams,
        session,
    )
