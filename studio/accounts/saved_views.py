"""A person's last view of a list (its URL query), per team, to open it with again.

The Instances page saves the query of every view a signed-in person opens (filters and
order, never a page cursor) and, opened with no query at all, goes back to the saved
one. Only people are remembered: an API token's requests save nothing.
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


async def remembered(store: Store, principal: Principal, path: str, asked: str, shown: str) -> str:
    """Where a list opened at ``path`` with the query ``asked`` should go instead: the
    person's saved view when ``asked`` is empty and one is saved. Otherwise '' (show
    this view), after saving ``shown``, its query without a page cursor."""
    user = principal.user
    if user is None or principal.team is None:
        return ""
    team = principal.team.team_id
    if not asked:
        saved = await load(store, user.user_id, team, path)
        return f"{path}?{saved}" if saved else ""
    await save(store, user.user_id, team, path, shown)
    return ""
