"""Posted forms, and a refused one shown again.

A form the studio refuses for what it carries (content it cannot take: ``Invalid``,
422; a clash with what is stored: ``Conflict``, 409) is answered with the same form
again rather than an error page: the status says it was refused, the message beside
the form says what was wrong and what is allowed, and every field still holds what was
typed, ticked or chosen, so nothing has to be typed twice. The start form
(``/instances/new``) did it first; every form page does it the same way: it catches
``REFUSALS`` (the Holds page every ``StudioError``: a hold gone or released meanwhile
is said beside the list) and renders its page with ``again(refused, posted)`` as
context, whose template reads ``error`` and fills its fields from ``values``
(``Posted``). A page with
more than one form names the refused one (``refused_form``), so only that form shows
the message and keeps the values. htmx answers a refused form the same way: its
configuration (``base.html``) swaps 409 and 422 answers in place, so a form that htmx
posts gets its own fragment again, as the instance page's action panel does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from litestar import Request

from studio.errors import Conflict, Invalid, StudioError

REFUSALS: tuple[type[StudioError], ...] = (Invalid, Conflict)
"""What a form answers by showing itself again (other errors are pages of their own:
a 404 names nothing the form could fix)."""


@dataclass(frozen=True)
class Posted:
    """What a form carried, as text: each field's values in the order they came (a
    checkbox list or a multiple choice has many; other fields one). Templates read it
    like the dict of first values that ``rendering.form_values`` gives (``get``), and
    a field posted many times with ``all``."""

    fields: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def get(self, name: str, default: str = "") -> str:
        """The first value of ``name`` (``default`` when it was not posted)."""
        found = self.fields.get(name)
        return found[0] if found else default

    def all(self, name: str) -> tuple[str, ...]:
        """Every value of ``name`` (the ticked boxes of a list of checkboxes)."""
        return tuple(self.fields.get(name, ()))

    def __contains__(self, name: object) -> bool:
        return name in self.fields

    def __bool__(self) -> bool:
        return bool(self.fields)


async def posted(request: Request) -> Posted:
    """The request's form (a GET's query) as ``Posted``; files are left out (a browser
    cannot fill a file field again)."""
    source = await request.form() if request.method == "POST" else request.query_params
    fields: dict[str, list[str]] = {}
    for name, value in source.multi_items():
        if isinstance(value, str):
            fields.setdefault(name, []).append(value)
    return Posted({name: tuple(values) for name, values in fields.items()})


def again(
    refused: StudioError, values: Posted | Mapping[str, str], form: str = ""
) -> dict[str, Any]:
    """The context that shows a refused form again: its status, the message, what was
    typed, and (on a page of many forms, ``form``) which form it was."""
    shown = {"status": refused.status, "error": str(refused), "values": values}
    return {**shown, "refused_form": form} if form else shown


def beside(refused: StudioError) -> dict[str, str]:
    """Each problem of ``refused`` by the field it concerns (a form's ``field_errors``;
    '' is the whole form's), so a form of several fields says each beside its own
    field rather than one message above them all."""
    return {p.get("path", ""): p["message"] for p in refused.problems}


def shown(refusal: Mapping[str, Any]) -> dict[str, Any]:
    """A form page's context: ``refusal`` (``again``'s) when its form was refused, else
    empty fields, no message, no refused form and no field's problem, so templates read
    them either way."""
    empty = {"values": Posted(), "error": "", "refused_form": "", "field_errors": {}}
    return {**empty, **refusal}
