"""Whether a principal still stands: the re-check before a machine's advance (issue 19).

A submit records who submitted (actor, team) and their role then (the ``scope``); each
advance must find that the actor is still in the team with a role that still covers
the scope (``principal_standing``, a view over the studio's account tables, migration
0011). The engine's own team ``''`` (the command line, tests, drills: callers with the
database itself in hand) has no accounts and always stands.

Roles are sets of abilities (``studio.roles``): a role covers a scope when it has every
ability of it, so an admin covers every scope and an author does not cover an operator.
"""

from __future__ import annotations

from enum import StrEnum

import psycopg

from engine.store.statements import principals as sql
from engine.store.store import Store

COVERS = {
    "viewer": {"viewer"},
    "author": {"viewer", "author"},
    "operator": {"viewer", "operator"},
    "admin": {"viewer", "author", "operator", "admin"},
}
"""The scopes each role covers (the studio's roles and their abilities)."""


class Standing(StrEnum):
    STANDS = "stands"
    """The actor is in the team with a role that covers the scope."""
    GONE = "gone"
    """No such actor in the team any more: removed, or a token revoked or expired."""
    NARROWED = "narrowed"
    """Still in the team, but its role no longer covers the scope of the submit."""


async def principal_standing(store: Store, actor: str, team: str, scope: str) -> Standing:
    """Whether ``actor`` of ``team`` may still act with ``scope`` (see the module)."""
    if team == "":
        return Standing.STANDS
    async with store.reading() as conn:
        return await standing_on(conn, actor, team, scope)


async def standing_on(conn: psycopg.AsyncConnection, actor: str, team: str, scope: str) -> Standing:
    """``principal_standing`` read on ``conn``: inside an advance's own transaction, so
    the advance commits only on what that transaction saw."""
    if team == "":
        return Standing.STANDS
    row = await (await conn.execute(sql.STANDING, {"actor": actor, "team": team})).fetchone()
    if row is None:
        return Standing.GONE
    return Standing.STANDS if scope in COVERS.get(row[0], set()) else Standing.NARROWED
