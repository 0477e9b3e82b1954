"""The one access check every route goes through.

The route table (``studio.routes``) gives each route its required access; this guard
enforces it: who is asking (session cookie or API token), the CSRF token of a session's
state-changing request, a pending password change, and the role in the current team.
A route without a rule is refused outright, so forgetting one fails closed.
"""

from __future__ import annotations

import hmac

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException, PermissionDeniedException
from litestar.handlers import BaseRouteHandler

from studio import principal as principals
from studio.accounts.sessions import COOKIE
from studio.errors import PasswordChangeRequired
from studio.principal import Principal
from studio.roles import Access, allows

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "_csrf"
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
_UNRESOLVED = object()
TOKEN_REFUSED = "the API token is not accepted: it is unknown, revoked or expired"
"""Why a request that carries a bearer token is refused: a script says what to fix
(which of the three is not told: that would help someone guessing tokens)."""
NO_TOKEN = (
    "sign in first: send 'Authorization: Bearer <token>' with an API token (wl_...) made "
    "on the Settings page, or the cookie of a signed-in session"
)
"""Why an API request with no credentials at all is refused."""
AUTHORIZATION_SHAPE = (
    "the Authorization header must be 'Bearer <token>' with an API token (wl_...) made on "
    "the Settings page"
)
"""Why a request whose Authorization header is of another shape is refused."""


async def current_principal(connection: ASGIConnection) -> Principal | None:
    """Who is asking, resolved once per request (a bearer token wins over a cookie)."""
    state = connection.scope.setdefault("state", {})  # type: ignore[typeddict-item]
    cached = state.get("principal", _UNRESOLVED)
    if cached is not _UNRESOLVED:
        return cached  # type: ignore[return-value]
    found = await resolve_principal(connection)
    state["principal"] = found
    return found


async def resolve_principal(connection: ASGIConnection) -> Principal | None:
    """Who the request's credentials name now, read afresh from the store (not the
    answer ``current_principal`` keeps for the rest of the request)."""
    store = connection.app.state.store
    authorization = connection.headers.get("authorization", "")
    if authorization:
        return await principals.from_bearer(store, authorization)
    if cookie := connection.cookies.get(COOKIE):
        return await principals.from_session(store, cookie)
    return None


async def still_allowed(connection: ASGIConnection, team_id: str, access: Access) -> bool:
    """Whether the request's credentials still give ``access`` in ``team_id``.

    The guard judges a request once, when it arrives. A response that goes on sending
    long after (an instance page's live stream, up to ``live_stream_limit``) asks again
    before each thing it sends: its session may have been signed out or ended by a
    password change, its token revoked, or its person removed from the team (or moved
    to another team in another tab) meanwhile, and none of them may go on reading."""
    principal = await resolve_principal(connection)
    return (
        principal is not None
        and principal.team_id == team_id
        and not principal.must_change_password
        and allows(principal.role, access)
    )


def _unauthorized(authorization: str, path: str) -> str:
    """Why no one is signed in: a bearer token refused, an Authorization header of
    another shape (``Basic ...``, a bare ``Bearer``) that says nothing this studio
    reads, or nothing given at all (to the API, most likely a script: it is told what
    to send; a person's page goes to the sign-in form)."""
    scheme, _, token = authorization.partition(" ")
    if f"{scheme.lower()} " == principals.BEARER and token.strip():
        return TOKEN_REFUSED
    if authorization.strip():
        return AUTHORIZATION_SHAPE
    return NO_TOKEN if path.startswith("/api/") else "sign in first"


def maybe_principal(request: Request) -> Principal | None:
    """Who is asking, as the access guard found it (None on a public page to no one)."""
    return request.scope.get("state", {}).get("principal")


def route_access(handler: BaseRouteHandler) -> Access | None:
    access = handler.opt.get("access")
    return access if isinstance(access, Access) else None


async def enforce_access(connection: ASGIConnection, handler: BaseRouteHandler) -> None:
    """Guard: allow the request, or raise 401/403 (PasswordChangeRequired is a 403)."""
    access = route_access(handler)
    if access is None:
        raise PermissionDeniedException("this route has no access rule")
    if access is Access.PROBE:
        return
    principal = await current_principal(connection)
    if access is Access.PUBLIC:
        return
    if principal is None:
        authorization = connection.headers.get("authorization", "")
        raise NotAuthorizedException(_unauthorized(authorization, connection.url.path))
    if connection.scope.get("method", "GET") not in SAFE_METHODS and principal.session:
        await check_csrf(connection, principal.session.csrf_token)
    if principal.must_change_password and access is not Access.SIGNED_IN:
        raise PasswordChangeRequired("choose a new password before you continue")
    if not allows(principal.role, access):
        raise PermissionDeniedException(
            f"this needs the {access.value} role in the current team"
            if principal.team
            else "you are not a member of any team yet; ask an admin to add you"
        )


async def check_csrf(connection: ASGIConnection, expected: str) -> None:
    """The session's token must come back in the header or the form; else 403."""
    sent = connection.headers.get(CSRF_HEADER, "")
    content_type = connection.headers.get("content-type", "")
    if not sent and isinstance(connection, Request) and content_type.startswith(FORM_TYPES):
        sent = (await connection.form()).get(CSRF_FIELD, "")
    if not isinstance(sent, str) or not sent or not hmac.compare_digest(sent, expected):
        raise PermissionDeniedException(
            "the request is missing its CSRF token (reload the page and try again)"
        )
