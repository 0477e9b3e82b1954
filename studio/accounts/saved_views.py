"""A person's last view of a list (its URL query), per team, to open it with again.

The Instances page saves the view a signed-in person chooses on it (filters and order,
never a page cursor) and, opened with no query at all, goes back to the saved one.
Choosing is a POST (the Filter form, a tab, a column's order, Clear), checked for the
session's CSRF token like every other change: a GET of the list with a query only shows
that view, so a link from another site (or an old bookmark) cannot change what the
person's list opens with. Only people are remembered: an API token saves nothing.
"""

from __future__ import annotations

from engine import Store
from studio.principal import Principal

MAX_SAVED_QUERY = 2000
"""Characters of a saved query (the table's check); a longer one is not saved, the list
still shows it."""

SAVE = """
INSERT INTO studio_saved_views (user_id, team_id, page, query) VALUES (%s, %s, %s, %s)
ON CONFLICT (user_id, team_id, page)
DO UPDATE SET query = EXCLUDED.query, saved_at = now()
WHERE studio_saved_views.query IS DISTINCT FROM EXCLUDED.query
"""
LOAD = "SELECT query FROM studio_saved_views WHERE user_id = %s AND team_id = %s AND page = %s"


async def save(store: Store, user_id: str, team_id: str, page: str, query: str) -> None:
    """Remember ``query`` as the person's view of ``page`` in the team."""
    if len(query) > MAX_SAVED_QUERY:
        return
    async with store.connection() as conn:
        await conn.execute(SAVE, (user_id, team_id, page, query))


async def load(store: Store, user_id: str, team_id: str, page: str) -> str:
    """The person's saved view of ``page`` in the team ('' when none)."""
    async with store.connection() as conn:
        row = await (await conn.execute(LOAD, (user_id, team_id, page))).fetchone()
    return row[0] if row else ""


async def remember(store: Store, principal: Principal, path: str, query: str) -> None:
    """Save ``query`` as the person's view of the list at ``path`` in their team
    (nothing for an API token, or someone in no team)."""
    if principal.user is not None and principal.team is not None:
        await save(store, principal.user.user_id, principal.team.team_id, path, query)


async def remembered(store: Store, principal: Principal, path: str, asked: str) -> str:
    """Where the list at ``path``, opened with the query ``asked``, should go instead:
    the person's saved view of it when ``asked`` is empty and one is saved; else ''
    (show the view asked for, saving nothing)."""
    if asked or principal.user is None or principal.team is None:
        return ""
    saved = await load(store, principal.user.user_id, principal.team.team_id, path)
    return f"{path}?{saved}" if saved else ""
