"""The machine draft editor's edits: add, change and remove states and edges, set the
bounds and declarations. Each is a plain form post on the draft (``/drafts/<id>/
machine/...``) saved through the draft editor (``DraftEditor.apply``: revision checked,
then back to the editor with the edited state selected), so the machine editor shares
the step lists' drafts, their conflicts, publishing and discarding."""

from __future__ import annotations

from litestar.di import NamedDependency
from litestar.response import Redirect, Template

from studio.definitions.editor_pages import DraftEditor
from studio.machines import edits


async def add_state(editor: NamedDependency[DraftEditor]) -> Template | Redirect:
    return await editor.apply_fields(edits.add_state, "name", "fields")


async def update_state(editor: NamedDependency[DraftEditor]) -> Template | Redirect:
    values = await editor.form()
    return await editor.apply(
        values,
        lambda d: edits.update_state(
            d,
            values.get("state", ""),
            fields=values.get("fields", ""),
            initial="initial" in values,
            terminal="terminal" in values,
            timer=values.get("timer", ""),
        ),
    )


async def remove_state(editor: NamedDependency[DraftEditor]) -> Template | Redirect:
    return await editor.apply_fields(edits.remove_state, "state")


async def add_edge(editor: NamedDependency[DraftEditor]) -> Template | Redirect:
    return await editor.apply_fields(edits.add_edge, "source", "target")


async def remove_edge(editor: NamedDependency[DraftEditor]) -> Template | Redirect:
    return await editor.apply_fields(edits.remove_edge, "source", "target")


async def set_bounds(editor: NamedDependency[DraftEditor]) -> Template | Redirect:
    values = await editor.form()
    selected = values.get("selected", "")
    return await editor.apply(values, lambda d: edits.set_bounds(d, values, selected))
