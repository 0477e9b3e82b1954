"""Drafts: definitions being edited, stored per team until they are published.

A draft holds any JSON object, valid or not, because work in progress is rarely valid.
Every save bumps its revision and names the revision it was made against; a save
against an older revision is refused (DraftChanged), so two windows editing the same
draft cannot silently overwrite each other. Drafts are only ever read through their
team: another team's draft id is simply not found.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from engine import Store
from studio.errors import Conflict, NotFound

MAX_DRAFTS_LISTED = 200

MAX_UNDO = 20
"""How many earlier documents a draft keeps to undo (and undone ones to redo)."""

COLUMNS = (
    "draft_id, team_id, document, based_on, revision, created_by, updated_by, "
    "created_at, updated_at, jsonb_array_length(undo), jsonb_array_length(redo)"
)
_PUSHED = """(SELECT coalesce(jsonb_agg(e ORDER BY i), '[]') FROM jsonb_array_elements(
    jsonb_build_array(document) || {stack}) WITH ORDINALITY AS t(e, i) WHERE i <= {cap})"""
"""``stack`` with the current document in front, cut to ``MAX_UNDO`` entries."""
CREATE = f"""
INSERT INTO studio_drafts (draft_id, team_id, document, based_on, created_by, updated_by)
VALUES (%s, %s, %s, %s, %s, %s) RETURNING {COLUMNS}
"""
GET = f"SELECT {COLUMNS} FROM studio_drafts WHERE draft_id = %s AND team_id = %s"
LIST = f"""
SELECT {COLUMNS} FROM studio_drafts WHERE team_id = %s
ORDER BY updated_at DESC, draft_id LIMIT %s
"""
SAVE = f"""
UPDATE studio_drafts SET document = %s, revision = revision + 1, updated_by = %s,
    updated_at = now(), undo = {_PUSHED.format(stack="undo", cap=MAX_UNDO)}, redo = '[]'
WHERE draft_id = %s AND team_id = %s AND revision = %s
RETURNING {COLUMNS}
"""


def _step_back(source: str, other: str) -> str:
    """Bring back the newest document of ``source`` (undo or redo), keeping the current
    one in ``other`` so the step can be taken back."""
    return f"""
UPDATE studio_drafts SET document = {source} -> 0, {source} = {source} - 0,
    {other} = {_PUSHED.format(stack=other, cap=MAX_UNDO)},
    revision = revision + 1, updated_by = %s, updated_at = now()
WHERE draft_id = %s AND team_id = %s AND revision = %s AND jsonb_array_length({source}) > 0
RETURNING {COLUMNS}
"""


STEPS_BACK = {"undo": _step_back("undo", "redo"), "redo": _step_back("redo", "undo")}
DELETE = "DELETE FROM studio_drafts WHERE draft_id = %s AND team_id = %s RETURNING 1"


class DraftChanged(Conflict):
    """The draft was saved by someone (or another window) since this edit was made."""

    def __init__(self, made_on: int, current: int) -> None:
        super().__init__(
            f"this draft was changed elsewhere since revision {made_on} (another window or "
            f"caller): it is at revision {current} now; repeat your change on that one"
        )


@dataclass(frozen=True)
class Draft:
    """A team's unpublished document; ``revision`` counts saves so an edit made on an
    older one is refused (``DraftChanged``) instead of overwriting it."""

    draft_id: str
    team_id: str
    document: dict[str, Any]
    based_on: str
    revision: int
    created_by: str
    updated_by: str
    created_at: datetime
    updated_at: datetime
    undoable: int = 0
    """How many earlier documents undo can bring back."""
    redoable: int = 0
    """How many undone documents redo can bring back."""

    @property
    def title(self) -> str:
        """``name@version`` as far as the document says."""
        name = self.document.get("name")
        version = self.document.get("version")
        name = name if isinstance(name, str) and name else "untitled"
        return f"{name}@{version}" if isinstance(version, str) and version else name


async def create_draft(
    store: Store, team_id: str, document: dict[str, Any], based_on: str, actor: str
) -> Draft:
    draft_id = uuid.uuid4().hex
    params = (draft_id, team_id, Jsonb(document), based_on, actor, actor)
    async with store.connection() as conn:
        row = await (await conn.execute(CREATE, params)).fetchone()
    return Draft(*row)


async def get_draft(store: Store, team_id: str, draft_id: str) -> Draft:
    async with store.connection() as conn:
        row = await (await conn.execute(GET, (draft_id, team_id))).fetchone()
    if row is None:
        raise NotFound("no such draft in this team")
    return Draft(*row)


async def list_drafts(store: Store, team_id: str) -> list[Draft]:
    async with store.connection() as conn:
        rows = await (await conn.execute(LIST, (team_id, MAX_DRAFTS_LISTED))).fetchall()
    return [Draft(*row) for row in rows]


async def save_draft(
    store: Store,
    team_id: str,
    draft_id: str,
    document: dict[str, Any],
    revision: int,
    actor: str,
) -> Draft:
    """Store a new document made against ``revision``; DraftChanged when it is stale."""
    params = (Jsonb(document), actor, draft_id, team_id, revision)
    return await _update(store, SAVE, params, team_id, draft_id)


async def step_back(
    store: Store, team_id: str, draft_id: str, way: str, revision: int, actor: str
) -> Draft:
    """Undo (``way`` 'undo') or redo (``'redo'``) the last edit, as of ``revision``.

    DraftChanged when the draft moved on since; Conflict when there is nothing to undo
    or redo (the editor's buttons are disabled then; an old page may still ask).
    """
    params = (actor, draft_id, team_id, revision)
    return await _update(store, STEPS_BACK[way], params, team_id, draft_id, way)


async def _update(
    store: Store,
    statement: str,
    params: tuple[Any, ...],
    team_id: str,
    draft_id: str,
    way: str = "",
) -> Draft:
    """Run one revision-checked update; the draft it saved, or why it saved nothing."""
    async with store.connection() as conn:
        row = await (await conn.execute(statement, params)).fetchone()
        if row is not None:
            return Draft(*row)
        current = await (await conn.execute(GET, (draft_id, team_id))).fetchone()
    if current is None:
        raise NotFound("no such draft in this team")
    now = Draft(*current).revision
    if way and now == params[-1]:
        raise Conflict(f"there is nothing to {way}")
    raise DraftChanged(params[-1], now)


async def delete_draft(store: Store, team_id: str, draft_id: str) -> None:
    async with store.connection() as conn:
        if await (await conn.execute(DELETE, (draft_id, team_id))).fetchone() is None:
            raise NotFound("no such draft in this team")
