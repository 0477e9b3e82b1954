"""Turning errors into responses: JSON for the API, pages (or htmx redirects) for people.

Expected errors carry a message meant for the person (the service layer's StudioError,
Litestar's 401/403/404/405). Anything else is a 500 whose details go to the log only:
driver text, SQL or payloads never reach a response.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import quote, urlsplit

from litestar import Request, Response
from litestar.exceptions import (
    HTTPException,
    MethodNotAllowedException,
    NotAuthorizedException,
    NotFoundException,
    ValidationException,
)
from litestar.exceptions.http_exceptions import RequestEntityTooLarge
from litestar.response import Redirect, Template

from engine import StoreUnavailable
from engine.model.errors import (
    CommandConflict,
    DecisionRejected,
    DefinitionNotFound,
    InputRefused,
    LimitExceeded,
    SignalConflict,
)
from engine.model.limits import MAX_KEY_LENGTH
from studio.accounts.sessions import COOKIE
from studio.api_responses import DATABASE_UNAVAILABLE, ErrorOut
from studio.errors import PasswordChangeRequired, StudioError
from studio.rendering import is_htmx, page
from studio.request_bodies import allowed_values
from studio.settings import BODY_TOO_LARGE

log = logging.getLogger("wayline.studio")
SHAPE = "the request is not in the expected shape"
"""Said of a request whose fields are listed in ``problems``; a missing parameter is
named in the message itself (Litestar's words, without the URL it appends)."""


MISSING_FIELD = re.compile(r"Object missing required field `([^`]+)`")
"""Litestar's words for a required field left out, which it locates at the object
(``data`` for the body itself): the problem's path names the field instead."""
BODY_KEY = "data"

NO_SUCH_PATH = "no such path; the API's paths are listed in /schema/openapi.json"
"""A path no route serves (a resource that is not found says which one instead)."""
WORD_SHOWN = MAX_KEY_LENGTH
"""The most characters of one word (a name, an id) an error message repeats: the
longest id or key anything can have. A longer one was typed into a URL or a field and
names nothing; it is cut, so an answer stays small whatever was sent."""
LONG_WORD = re.compile(rf"\S{{{WORD_SHOWN + 1},}}")
RETRY_AFTER_SECONDS = 5
"""The ``Retry-After`` of a 503: about how long a database restart takes."""


def describe(
    error: Exception, handler: object = None, quiet: bool = False
) -> tuple[int, str, list[dict[str, str]]]:
    """Status, message and (for invalid content) located problems of an error raised
    while ``handler`` (the route's handler, when one was found) served the request; an
    outage or an unexpected error is logged unless ``quiet`` (``status_of``). A word
    longer than ``WORD_SHOWN`` in the message is cut."""
    status, message, problems = _described(error, handler, quiet)
    return status, LONG_WORD.sub(_cut, message), problems


def _cut(word: re.Match[str]) -> str:
    return f"{word[0][:WORD_SHOWN]}… ({len(word[0])} characters)"


def _described(
    error: Exception, handler: object, quiet: bool
) -> tuple[int, str, list[dict[str, str]]]:
    if isinstance(error, StudioError):
        return error.status, str(error), error.problems
    if isinstance(error, DefinitionNotFound):
        return 404, str(error), []
    if isinstance(error, InputRefused):  # a value that cannot be taken at all
        return 400, str(error), []
    if isinstance(error, LimitExceeded):  # a value larger than the engine's named limit
        return 422, str(error), []
    if isinstance(error, DecisionRejected):  # the instance's state does not allow it now
        return 409, f"the instance does not allow this now: {error}", []
    if isinstance(error, CommandConflict | SignalConflict):  # an id already used otherwise
        return 409, str(error), []
    if isinstance(error, ValidationException):
        problems = _validation(error, handler)
        return 400, SHAPE if problems else error.detail.split(" for path ")[0], problems
    if isinstance(error, RequestEntityTooLarge):
        return 413, BODY_TOO_LARGE, []
    if isinstance(error, MethodNotAllowedException):
        allowed = (error.headers or {}).get("allow", "")
        return 405, f"this path does not take that method; it takes {allowed}", []
    if isinstance(error, HTTPException):
        return error.status_code, error.detail, []
    if isinstance(error, StoreUnavailable):  # the driver's words (host, user) stay in the log
        if not quiet:
            log.warning("the database did not answer: %s", error)
        return 503, DATABASE_UNAVAILABLE, []
    if not quiet:
        log.exception("unexpected error", exc_info=error)
    return 500, "something went wrong on the server; the details are in its log", []


def status_of(error: Exception, handler: object = None) -> int:
    """The status ``handle_error`` answers ``error`` with (nothing logged): what the
    request latencies record for an error raised before any response started, such as
    a body the input gate refused (400) or one too large (413)."""
    return describe(error, handler, quiet=True)[0]


def _validation(error: ValidationException, handler: object) -> list[dict[str, str]]:
    """Litestar's located problems; a value outside a closed set says what the set is."""
    extra = error.extra if isinstance(error.extra, list) else []
    problems = []
    for item in extra:
        if not isinstance(item, dict):
            continue
        path, message = str(item.get("key", "")), str(item.get("message", ""))
        if message.startswith("Invalid enum value") and (allowed := allowed_values(handler, path)):
            message = f"{message}; it is one of {', '.join(allowed)}"
        if missing := MISSING_FIELD.fullmatch(message):  # located at the object that lacks it
            within = "" if path == BODY_KEY else path
            path = f"{within}.{missing[1]}" if within else missing[1]
            message = "required, and missing"
        problems.append({"path": path, "message": message})
    return problems


def handle_error(request: Request, error: Exception) -> Response:
    handler = request.scope.get("route_handler")
    status, message, problems = describe(error, handler)
    if handler is None:  # no route answered it, so no middleware timed it: counted here
        unrouted = request.app.state.request_latencies.unrouted
        unrouted.labels(request.method, str(status)).inc()
    if request.url.path.startswith("/api/"):
        if isinstance(error, NotFoundException) and handler is None:  # no route at all
            message = NO_SUCH_PATH
        return Response(ErrorOut(message, problems), status_code=status, headers=_headers(error))
    if isinstance(error, NotAuthorizedException):
        # A session cookie that no longer signs anyone in: the session ended (expired or
        # revoked; signing out deletes the cookie), which the sign-in page says.
        ended = "&ended=1" if COOKIE in request.cookies else ""
        return _to("/login?next=" + quote(_return_to(request)) + ended, request, 401)
    if isinstance(error, PasswordChangeRequired):
        return _to("/account", request, 403)
    return page(request, "error.html", status=status, status_code=status, message=message)


def _return_to(request: Request) -> str:
    """Where signing in again goes on: the page asked for; or, for a form sent (a POST,
    most of whose paths answer no GET) and for a part of a page that htmx fetched (a
    panel, no page to land on), the page they belong to, which htmx names in
    ``HX-Current-URL`` and a browser in ``Referer``. The sign-in form keeps only local
    paths of either."""
    query = request.url.query
    asked = request.url.path + (f"?{query}" if query else "")
    if request.method in ("GET", "HEAD") and not is_htmx(request):
        return asked
    sent_from = request.headers.get("hx-current-url") or request.headers.get("referer") or ""
    page_path = urlsplit(sent_from)
    if not page_path.path.startswith("/") or page_path.path.startswith("/login"):
        return asked
    return page_path.path + (f"?{page_path.query}" if page_path.query else "")


def _headers(error: Exception) -> dict[str, str]:
    """Headers an error answer keeps: a 405's ``Allow`` (which methods the path takes)
    and a 401's challenge."""
    headers = dict(error.headers or {}) if isinstance(error, HTTPException) else {}
    if isinstance(error, NotAuthorizedException):
        headers["WWW-Authenticate"] = "Bearer"
    if isinstance(error, StoreUnavailable):
        headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return headers


def _to(target: str, request: Request, status: int) -> Response:
    """Send the browser elsewhere: a redirect, or HX-Redirect for an htmx request."""
    if is_htmx(request):
        return Response(content="", status_code=status, headers={"HX-Redirect": target})
    if request.method in ("GET", "HEAD"):
        return Redirect(target, status_code=303)
    return Template(
        template_name="error.html",
        context={
            "status_code": status,
            "message": "sign in first",
            "principal": None,
            "sign_in": target,
        },
        status_code=status,
    )
