"""What an API route's query string may hold: the parameters its handler declares.

Litestar reads the query parameters a handler (and the dependencies it asks for, such
as the instance list's filters) declares and ignores every other one, so a misspelt
filter was silently dropped: ``GET /api/instances?stauts=running`` answered every
instance, and the caller never knew. The names a route takes are read once, from the
parameter model Litestar built for it, at startup (``record_query_names``), and
``unknown_parameters`` finds the others in a request, so that the request is refused
(400, like a body field the route does not take) before anything is read.

Only a parameter's name is said back, cut to ``NAME_SHOWN`` characters, and at most
``UNKNOWN_SHOWN`` of them: never its value.
"""

from __future__ import annotations

from collections.abc import Iterable

from litestar import Litestar

from engine.model.words import clipped
from studio.errors import BadRequest
from studio.request_bodies import in_words

QUERY_NAMES = "query_names"
"""Where a handler's ``opt`` keeps the names it takes, and which of them are required."""
NAME_SHOWN = 40
"""The most characters of an unknown parameter's name said back (a URL may be long)."""
UNKNOWN_SHOWN = 5
"""The most unknown parameters named in one answer; the rest are counted."""


def record_query_names(app: Litestar) -> None:
    """Note on each API handler the query parameters it takes (its own and its
    dependencies'), as Litestar's parameter model for its route says. Run at startup,
    once every route is registered."""
    for route in app.routes:
        for handler, model in getattr(route, "route_handler_map", {}).values():
            params = model.expected_query_params
            names = sorted(p.field_alias for p in params)
            required = sorted(p.field_alias for p in params if p.is_required)
            handler.opt[QUERY_NAMES] = (names, required)


def unknown_parameters(handler: object, given: Iterable[str]) -> BadRequest | None:
    """The refusal of a request whose query parameter names (``given``) include some
    ``handler`` does not take: each named (at most ``UNKNOWN_SHOWN``) with the ones it
    does take; None when every name is taken."""
    names, required = getattr(handler, "opt", {}).get(QUERY_NAMES, ([], []))
    unknown = sorted({name for name in given if name not in names})
    if not unknown:
        return None
    takes = f"it takes {in_words(names, required)}" if names else "it takes no query parameters"
    shown = [clipped(name, NAME_SHOWN) for name in unknown[:UNKNOWN_SHOWN]]
    more = f" and {len(unknown) - len(shown)} more" if len(unknown) > len(shown) else ""
    message = f"this route takes no query parameter {', '.join(shown)}{more}; {takes}"
    problems = [{"path": name, "message": f"not a query parameter here; {takes}"} for name in shown]
    return BadRequest(message, problems)
