"""One gate for what every request carries, before any route reads it.

The path (and so every id in it), the query string, form fields and JSON bodies are
checked here with the engine's rules for values from outside (``engine.model.inputs``): no
NUL character (PostgreSQL text cannot hold one, so a lookup would fail in the driver),
no lone surrogate, and JSON nested at most ``MAX_JSON_DEPTH`` levels (deeper bodies
would exhaust the decoder's recursion). A request that breaks one is answered 400 with
what was wrong and where, whichever route it was for, signed in or not.

An API route's body is JSON whatever its content type says. Once the access guard let
the request through, ``check_request_fields`` (the app's ``before_request``) holds an API
request to the query parameters its route takes (``studio.query_params``) and to the
fields the route's request class declares (``studio.request_bodies``): a misspelt
parameter or field is refused (400, naming it and the ones allowed) rather than dropped,
and an empty body where one is needed says which fields to send. It runs after the guard so
that a caller who may not use the route learns that (401, 403) and nothing about it.

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
from studio.failures import SHAPE
from studio.query_params import unknown_parameters
from studio.request_bodies import body_class, takes, unknown_fields

FORMS = (RequestEncodingType.URL_ENCODED, RequestEncodingType.MULTI_PART)
JSON_BODY = "json_body"
"""Where the gate keeps the JSON body it read (in the scope's state) for the field check."""


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
    api = request.url.path.startswith("/api/")
    if content_type in FORMS and not api:
        for name, value in (await request.form()).items():
            check_text(name, "a form field's name")
            if isinstance(value, str):
                check_text(value, f"the form field {name}")
        return
    body = await request.body()
    if (api or content_type.endswith("json")) and body:
        request.scope.setdefault("state", {})[JSON_BODY] = read_json(body, "the request body")
    elif b"\x00" in body:
        raise InputRefused("the request body contains a NUL character, which is not allowed")


async def check_request_fields(request: Request) -> None:
    """Refuse (400) an API request with a query parameter its route does not take, or
    whose JSON body is missing though the route needs one, or holds a field its request
    class does not declare."""
    if request.url.path.startswith("/api/"):
        refused = unknown_parameters(request.route_handler, request.query_params.keys())
        if refused is not None:
            raise refused
    cls, required = body_class(request.route_handler)
    if cls is None or request.method in ("GET", "HEAD"):
        return
    body = await request.body()
    if not body:
        if required:
            raise BadRequest(f"the request body is empty; send a JSON object with {takes(cls)}")
        return
    value = request.scope.get("state", {}).get(JSON_BODY)
    if problems := unknown_fields(cls, value):
        raise BadRequest(SHAPE, problems)
