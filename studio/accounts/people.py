"""People: users, teams and memberships (a user's role in a team).

Users are global (one sign-in), roles are per team, and everything a person sees or
does happens in one team at a time. Usernames are lower-cased so ``Ada`` and ``ada``
cannot be two accounts. The first start of an empty studio creates a ``default`` team
and an ``admin`` user with a one-time password that must be changed at first sign-in.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

import psycopg

from engine import Store
from engine.decide.audit import COMMAND_LINE_ACTOR
from engine.model.identifiers import TEAM_PATTERN, TEAM_RULE
from studio.accounts import account_audit
from studio.accounts.account_audit import AccountAction
from studio.accounts.passwords import generate_password, hash_password
from studio.roles import Role

USERNAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
MAX_DISPLAY_NAME = 100
"""Characters in a person's display name (it is shown in tables and audit lists)."""
MAX_TEAM_NAME = 100
"""Characters in a team's name."""
DEFAULT_TEAM = "default"
FIRST_ADMIN = "admin"

INSERT_TEAM = "INSERT INTO studio_teams (team_id, name) VALUES (%s, %s) ON CONFLICT DO NOTHING"
INSERT_USER = """
INSERT INTO studio_users (user_id, username, display_name, password_hash, must_change_password)
VALUES (%s, %s, %s, %s, %s)
"""
USER_COLUMNS = "user_id, username, display_name, must_change_password"
FIND_LOGIN = f"SELECT {USER_COLUMNS}, password_hash FROM studio_users WHERE username = %s"
GET_USER = f"SELECT {USER_COLUMNS} FROM studio_users WHERE user_id = %s"
SET_PASSWORD = """
UPDATE studio_users SET password_hash = %s, must_change_password = %s WHERE user_id = %s
"""
MEMBERSHIPS = """
SELECT t.team_id, t.name, m.role FROM studio_memberships m
JOIN studio_teams t USING (team_id) WHERE m.user_id = %s ORDER BY t.name, t.team_id
"""
LOCK_USER = "SELECT username FROM studio_users WHERE user_id = %s FOR NO KEY UPDATE"
"""Taken first by every change of a user's memberships, so that the role each one reads
as the former role (and records) is the one it replaces."""
ROLE_IN_TEAM = "SELECT role FROM studio_memberships WHERE user_id = %s AND team_id = %s"
SET_MEMBERSHIP = """
INSERT INTO studio_memberships (user_id, team_id, role) VALUES (%s, %s, %s)
ON CONFLICT (user_id, team_id) DO UPDATE SET role = EXCLUDED.role
"""
REMOVE_MEMBERSHIP = "DELETE FROM studio_memberships WHERE user_id = %s AND team_id = %s"
TEAM_MEMBERS = f"""
SELECT {", ".join("u." + c for c in USER_COLUMNS.split(", "))}, m.role
FROM studio_memberships m JOIN studio_users u USING (user_id)
WHERE m.team_id = %s ORDER BY u.username
"""
ANY_USER = "SELECT 1 FROM studio_users LIMIT 1"
LOCK_BOOTSTRAP = "SELECT pg_advisory_xact_lock(hashtext('wayline studio bootstrap'))"


class PeopleError(ValueError):
    """A request about people that cannot be done; the message says why."""


@dataclass(frozen=True)
class Team:
    """A team: the unit that owns definitions, instances and drafts, so access is granted
    by membership rather than per object."""

    team_id: str
    name: str


@dataclass(frozen=True)
class User:
    """A person who signs in; ``must_change_password`` holds an account whose password
    was generated (printed once) to choosing its own before anything else."""

    user_id: str
    username: str
    display_name: str
    must_change_password: bool = False

    @property
    def label(self) -> str:
        return self.display_name or self.username


@dataclass(frozen=True)
class Membership:
    """One of a user's teams with the role there: what the team switcher offers."""

    team: Team
    role: Role


@dataclass(frozen=True)
class Member:
    """One of a team's people with the role there: what the settings page lists."""

    user: User
    role: Role


def normalize_username(username: str) -> str:
    """The username as stored; PeopleError when it breaks the rule, or is the name the
    command line acts as (``COMMAND_LINE_ACTOR``): audit trails name both alike, so a
    person of that name could not be told from the command line."""
    name = username.strip().lower()
    if not USERNAME.fullmatch(name):
        raise PeopleError(
            "a username has 1 to 63 characters: a-z, 0-9, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    if name == COMMAND_LINE_ACTOR:
        raise PeopleError(f"the username {name} is reserved: audit trails name the command line so")
    return name


def check_display_name(display_name: str) -> str:
    """The display name without surrounding spaces; PeopleError when it is too long."""
    name = display_name.strip()
    if len(name) > MAX_DISPLAY_NAME:
        raise PeopleError(
            f"a display name has at most {MAX_DISPLAY_NAME} characters, not {len(name)}"
        )
    return name


def check_team_id(team_id: str) -> str:
    if not TEAM_PATTERN.fullmatch(team_id):
        raise PeopleError(f"a team id has {TEAM_RULE}")
    return team_id


async def ensure_team(store: Store, team_id: str, name: str) -> Team:
    """The team, created when missing (an existing team keeps its name)."""
    check_team_id(team_id)
    name = name.strip() or team_id
    if len(name) > MAX_TEAM_NAME:
        raise PeopleError(f"a team name has at most {MAX_TEAM_NAME} characters, not {len(name)}")
    async with store.connection() as conn:
        await conn.execute(INSERT_TEAM, (team_id, name))
    return Team(team_id, name)


async def create_user(
    store: Store,
    username: str,
    password: str,
    display_name: str = "",
    must_change_password: bool = False,
) -> User:
    """A new user; PeopleError when the username is taken or the password too weak."""
    user = User(uuid.uuid4().hex, normalize_username(username), check_display_name(display_name))
    password_hash = await hash_password(password, user.username)
    try:
        async with store.connection() as conn:
            await conn.execute(
                INSERT_USER,
                (
                    user.user_id,
                    user.username,
                    user.display_name,
                    password_hash,
                    must_change_password,
                ),
            )
    except psycopg.errors.UniqueViolation:
        raise PeopleError(f"the username {user.username} is taken") from None
    return User(user.user_id, user.username, user.display_name, must_change_password)


async def find_login(store: Store, username: str) -> tuple[User, str] | None:
    """The user and stored password hash for a sign-in attempt, or None."""
    try:
        name = normalize_username(username)
    except PeopleError:
        return None
    async with store.connection() as conn:
        row = await (await conn.execute(FIND_LOGIN, (name,))).fetchone()
    return None if row is None else (User(*row[:4]), row[4])


async def get_user(store: Store, user_id: str) -> User | None:
    async with store.connection() as conn:
        row = await (await conn.execute(GET_USER, (user_id,))).fetchone()
    return None if row is None else User(*row)


async def set_password(conn: psycopg.AsyncConnection, user_id: str, password_hash: str) -> None:
    """Store the hash of a password its person chose (so none is left to change), in the
    transaction of ``conn``: a password change ends the person's sessions in that same
    transaction (``service.change_password``), so the new password never stands while
    the sessions opened before it still work. The hash is made (``hash_password``)
    before the transaction begins, which then holds its locks for no argon2 work."""
    await conn.execute(SET_PASSWORD, (password_hash, False, user_id))


async def store_rehash(store: Store, user_id: str, password_hash: str, must_change: bool) -> None:
    """Replace a hash made with older parameters (after a successful sign-in)."""
    async with store.connection() as conn:
        await conn.execute(SET_PASSWORD, (password_hash, must_change, user_id))


async def memberships(store: Store, user_id: str) -> list[Membership]:
    """The user's teams and roles, by team name."""
    async with store.connection() as conn:
        rows = await (await conn.execute(MEMBERSHIPS, (user_id,))).fetchall()
    return [Membership(Team(team_id, name), Role(role)) for team_id, name, role in rows]


async def set_membership(
    store: Store,
    user_id: str,
    team_id: str,
    role: Role,
    actor: str,
    added: AccountAction = AccountAction.ADDED,
    keep_role: bool = False,
) -> bool:
    """Make the user a member of the team with ``role``, audited as done by ``actor``
    (``studio.accounts.account_audit``): ``added`` (or how they came, such as
    ``joined``) when they were not a member, ``role_changed`` when they had another
    role. ``keep_role``: a member keeps the role they have (an invitation redeemed by
    someone made a member since, who could otherwise change their own role: an admin
    who made themselves a viewer left a team without one). Whether anything changed;
    PeopleError when there is no such user."""
    role = Role(role)
    async with store.connection() as conn:
        username = await _lock_user(conn, user_id)
        former = await _role_in(conn, user_id, team_id)
        if former == role or (former is not None and keep_role):
            return False
        await conn.execute(SET_MEMBERSHIP, (user_id, team_id, role.value))
        action = added if former is None else AccountAction.ROLE_CHANGED
        await account_audit.record(conn, team_id, actor, action, username, former or "", role)
    return True


async def change_role(
    store: Store, team_id: str, user_id: str, role: Role, actor: str
) -> tuple[str, Role] | None:
    """Give a member of the team ``role``, audited as done by ``actor`` (nothing is
    recorded when it is the role they have): their username and former role, or None
    when they are no member of the team (nothing changes)."""
    role = Role(role)
    async with store.connection() as conn:
        username = await _lock_user(conn, user_id, missing_ok=True)
        former = None if username is None else await _role_in(conn, user_id, team_id)
        if username is None or former is None:
            return None
        if former != role:
            await conn.execute(SET_MEMBERSHIP, (user_id, team_id, role.value))
            await account_audit.record(
                conn, team_id, actor, AccountAction.ROLE_CHANGED, username, former, role
            )
    return username, former


async def remove_membership(
    store: Store, user_id: str, team_id: str, actor: str
) -> tuple[str, Role] | None:
    """Take the user out of the team, audited as done by ``actor``: their username and
    the role they had, or None when they were no member (nothing changes)."""
    async with store.connection() as conn:
        username = await _lock_user(conn, user_id, missing_ok=True)
        former = None if username is None else await _role_in(conn, user_id, team_id)
        if username is None or former is None:
            return None
        await conn.execute(REMOVE_MEMBERSHIP, (user_id, team_id))
        await account_audit.record(conn, team_id, actor, AccountAction.REMOVED, username, former)
    return username, former


async def _lock_user(
    conn: psycopg.AsyncConnection, user_id: str, missing_ok: bool = False
) -> str | None:
    row = await (await conn.execute(LOCK_USER, (user_id,))).fetchone()
    if row is None and not missing_ok:
        raise PeopleError("there is no such user")
    return None if row is None else row[0]


async def _role_in(conn: psycopg.AsyncConnection, user_id: str, team_id: str) -> Role | None:
    row = await (await conn.execute(ROLE_IN_TEAM, (user_id, team_id))).fetchone()
    return None if row is None else Role(row[0])


async def team_members(store: Store, team_id: str) -> list[Member]:
    async with store.connection() as conn:
        rows = await (await conn.execute(TEAM_MEMBERS, (team_id,))).fetchall()
    return [Member(User(*row[:4]), Role(row[4])) for row in rows]


async def bootstrap_admin(store: Store) -> str | None:
    """On an empty studio, create the default team and its admin; return the password.

    Returns None when anyone exists already. The password is generated, shown once by
    the caller, and must be changed at the first sign-in. An advisory lock keeps two
    studios starting at once from both creating an admin.
    """
    password = generate_password()
    password_hash = await hash_password(password, FIRST_ADMIN)
    async with store.connection() as conn:
        await conn.execute(LOCK_BOOTSTRAP)
        if await (await conn.execute(ANY_USER)).fetchone() is not None:
            return None
        user_id = uuid.uuid4().hex
        await conn.execute(INSERT_TEAM, (DEFAULT_TEAM, "Default team"))
        await conn.execute(
            INSERT_USER, (user_id, FIRST_ADMIN, "Administrator", password_hash, True)
        )
        await conn.execute(SET_MEMBERSHIP, (user_id, DEFAULT_TEAM, Role.ADMIN.value))
        await account_audit.record(
            conn,
            DEFAULT_TEAM,
            account_audit.FIRST_START,
            AccountAction.ADDED,
            FIRST_ADMIN,
            to_role=Role.ADMIN,
        )
    return password
