"""Acting as a machine resource's database role, and provisioning those roles (issue 19).

A machine's advance runs inside the transaction that records its transition; before
its code runs the engine switches to the role its grants name (``act_as``,
``SET LOCAL ROLE``) and back to the worker's login after (``act_as_self``), so the
engine's own writes are never the role's. The names are the machine mode's
(``engine.modes.machines.grants``); here is only what PostgreSQL is told.

A role that does not exist, or that the worker's login may not switch to, is a setup
problem, not the execution's: ``RoleUnavailable`` names it (``ROLE_MISSING`` or
``ROLE_REFUSED``), and the worker makes the advance's work a dead letter with that code
for an operator to retry once the roles are provisioned.

``provisioning`` is the idempotent SQL that creates every role and makes the worker's
login (by default whoever runs it) a member of each; ``wayline machine roles`` prints or
runs it. It is safe to run again and from many sessions at once.
"""

from __future__ import annotations

from collections.abc import Iterable

import psycopg
from psycopg import sql

from engine.model.errors import WaylineError
from engine.store.statements import roles as statements

ROLE_MISSING = "grant-role-missing"
ROLE_REFUSED = "grant-role-refused"
CURRENT_USER = sql.SQL("CURRENT_USER")
"""The member ``provisioning`` grants the roles to by default: whoever runs it."""


class RoleUnavailable(WaylineError):
    """The role an advance must act as does not exist (``ROLE_MISSING``) or the login
    may not switch to it (``ROLE_REFUSED``): ``code`` says which."""

    def __init__(self, code: str, role: str) -> None:
        super().__init__(f"cannot act as database role {role}: {code}")
        self.code = code
        self.role = role


async def act_as(conn: psycopg.AsyncConnection, role: str) -> None:
    """Act as ``role`` until the transaction ends or ``act_as_self``."""
    try:
        await conn.execute(statements.ACT_AS.format(role=sql.Identifier(role)))
    except psycopg.errors.InvalidParameterValue as exc:  # 22023: no such role
        raise RoleUnavailable(ROLE_MISSING, role) from exc
    except psycopg.errors.InsufficientPrivilege as exc:  # 42501: not a member
        raise RoleUnavailable(ROLE_REFUSED, role) from exc


async def act_as_self(conn: psycopg.AsyncConnection) -> None:
    """Act as the session's own login again."""
    await conn.execute(statements.ACT_AS_SELF)


def provisioning(
    roles: Iterable[tuple[str, ...]], member: sql.Composable = CURRENT_USER
) -> list[sql.Composed]:
    """The statements that create each role of ``roles`` (each tuple a chain: every
    role a member of the one before it, as a write role of its read role) and make
    ``member`` a member of each; in order, each safe to run again."""
    created: list[sql.Composed] = []
    granted: list[sql.Composed] = []
    for chain in roles:
        for n, role in enumerate(chain):
            name = sql.Identifier(role)
            created.append(statements.CREATE_ROLE.format(role=name))
            if n:
                granted.append(
                    statements.GRANT_ROLE.format(role=sql.Identifier(chain[n - 1]), member=name)
                )
            granted.append(statements.GRANT_ROLE.format(role=name, member=member))
    return created + granted


async def provision(
    conn: psycopg.AsyncConnection,
    roles: Iterable[tuple[str, ...]],
    member: sql.Composable = CURRENT_USER,
) -> None:
    """Run ``provisioning`` on ``conn``; on a connection in autocommit each statement
    is its own transaction, so none makes the others wait for its end."""
    for statement in provisioning(roles, member):
        await conn.execute(statement)
