"""Read-only views of a team's running work: instances and dead letters.

These back the Instances and Dead letters pages until the operator tools arrive; every
list is filtered by the team (instances by their tenant, dead letters by the tenant of
their work row).
"""

from __future__ import annotations

from datetime import datetime

from engine.limits import MAX_PAGE_ITEMS
from engine.store import dead_letters, reads
from engine.store.dead_letters import DeadLetter, DeadLetterCursor
from engine.store.reads import InstancePage, InstanceView
from engine.store.store import Store
from studio.errors import Invalid

PAGE_SIZE = 50
DEAD_LETTER_PAGES_SCANNED = 10
"""Dead letters are listed across teams by the store; scan at most this many pages."""


def parse_cursor(cursor: str | None) -> tuple[datetime, str] | None:
    """``<iso time>|<id>`` from a page link, or None for the first page."""
    if not cursor:
        return None
    stamp, _, ident = cursor.partition("|")
    try:
        return datetime.fromisoformat(stamp), ident
    except ValueError:
        raise Invalid("the page cursor is not valid; start from the first page") from None


def format_cursor(cursor: tuple[datetime, str] | None) -> str:
    return "" if cursor is None else f"{cursor[0].isoformat()}|{cursor[1]}"


async def instances(
    store: Store, team: str, view: str = "active", cursor: str | None = None
) -> InstancePage:
    try:
        chosen = InstanceView(view)
    except ValueError:
        raise Invalid("view is one of active, archived, all") from None
    return await reads.list_instances(store, chosen, parse_cursor(cursor), PAGE_SIZE, tenant=team)


async def team_dead_letters(
    store: Store, team: str, cursor: str | None = None
) -> tuple[list[DeadLetter], str]:
    """The team's unresolved dead letters, oldest first, and the cursor of the next page."""
    after_pair = parse_cursor(cursor)
    after = DeadLetterCursor(*after_pair) if after_pair else None
    found: list[DeadLetter] = []
    for _ in range(DEAD_LETTER_PAGES_SCANNED):
        page = await dead_letters.list_dead_letters(store, after, MAX_PAGE_ITEMS)
        found.extend(d for d in page.items if d.tenant_id == team)
        after = page.next_cursor
        if after is None or len(found) >= PAGE_SIZE:
            break
    if len(found) > PAGE_SIZE:
        last = found[PAGE_SIZE - 1]
        after = DeadLetterCursor(last.failed_at, last.work_id)
    next_cursor = format_cursor((after.failed_at, after.work_id)) if after else ""
    return found[:PAGE_SIZE], next_cursor
