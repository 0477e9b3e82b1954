"""Children under their parents in the instances list.

A child instance names its parent in its start event, so a page's rows can be arranged
after their parents with one read (``Queries.parents``): each child on the same page as
its parent follows it, indented, its own children after it; a child whose parent is not
on the page keeps its place and says whose child it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.api.queries import InstanceRow
from studio.reads import Reads


@dataclass(frozen=True)
class Listed:
    """A row as the list shows it: its parent's id ('' for none) and how deep it sits."""

    row: InstanceRow
    parent: str = ""
    depth: int = 0


async def arranged(reads: Reads, rows: Sequence[InstanceRow], nest: bool) -> list[Listed]:
    """``rows`` with their parents named, and (``nest``) each child after its parent."""
    parents = await reads.queries.parents([r.instance_id for r in rows]) if rows else {}
    if not nest:
        return [Listed(r, parents.get(r.instance_id, "")) for r in rows]
    shown = {r.instance_id for r in rows}
    children: dict[str, list[InstanceRow]] = {}
    for row in rows:
        if parents.get(row.instance_id) in shown:
            children.setdefault(parents[row.instance_id], []).append(row)
    listed: list[Listed] = []

    def place(row: InstanceRow, depth: int) -> None:
        listed.append(Listed(row, parents.get(row.instance_id, ""), depth))
        for child in children.get(row.instance_id, ()):
            place(child, depth + 1)

    for row in rows:
        if parents.get(row.instance_id) not in shown:
            place(row, 0)
    return listed
