"""One gate for what every request carries, before any route reads it.

The path (and so every id in it), the query string, form fields and JSON bodies are
checked here with the engine's rules for values from outside (``engine.model.inputs``): no
NUL character (PostgreSQL text cannot hold one, so a lookup would fail in the driver),
no lone surrogate, and JSON nested at most ``MAX_JSON_DEPTH`` levels (deeper bodies
would exhaust the decoder's recursion). A request that breaks one is answered 400 with
what was wrong and where, whichever route it was for, signed in or not.

The body is read once here and kept where Litestar's request looks for it, so routes
read the same bytes without a second read. Form fields holding JSON (an input, a
payload) are parsed later by their route with ``engine.model.inputs.read_json``, the same
rules.
"""

from __future__ import annotations

from litestar import Request
from litestar.enums import RequestEncodingType, ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Receive, Scope, Send

from engine.model.errors import InputRefused
from engine.model.inputs import check_text, read_json
from studio.errors import BadRequest

FORMS = (RequestEncodingType.URL_ENCODED, RequestEncodingType.MULTI_PART)


class InputChecks(ASGIMiddleware):
    """Refuse (400) a request whose path, query, form or JSON body cannot be taken."""

    scopes = (ScopeType.HTTP,)

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        request: Request = Request(scope, receive, send)
        try:
            check_text(request.url.path, "the address")
            for name, value in request.query_params.items():
                check_text(name, "a query parameter's name")
                check_text(value, f"the query parameter {name}")
            await _check_body(request)
        except InputRefused as refused:
            raise BadRequest(str(refused)) from None
        await next_app(scope, receive, send)


async def _check_body(request: Request) -> None:
    if request.method in ("GET", "HEAD"):
        return
    content_type, _ = request.content_type
    if content_type in FORMS:
        for name, value in (await request.form()).items():
            check_text(name, "a form field's name")
            if isinstance(value, str):
                check_text(value, f"the form field {name}")
        return
    body = await request.body()
    if not body:
        return
    if request.url.path.startswith("/api/") or content_type.endswith("json"):
        read_json(body, "the request body")
    elif b"\x00" in body:
        raise InputRefused("the request body contains a NUL character, which is not allowed")
