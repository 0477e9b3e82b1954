"""Security headers on every response the studio sends, and ``Cache-Control: no-store``
on every one but the studio's own static files.

They are added by a before-send hook, not by Litestar's ``response_headers``, because
those reach only responses made by a route handler: a 404 for an unknown path, a 405,
an error raised before a handler runs and the static files would go without them.

The content security policy allows scripts, styles, images and connections from the
studio itself only. The templates carry no inline script, ``<style>`` element, ``style``
attribute or event-handler attribute, so neither ``'unsafe-inline'`` nor
``'unsafe-eval'`` is needed: an injected script or style does not run. Scripts set sizes
through the CSSOM (``element.style``), which a policy does not restrict. Two htmx
defaults would write style attributes and are switched off in ``base.html``: its
inline indicator styles, and settling ``style`` (copying a zoomed graph's old size onto
its replacement for a transition; ``studio.js`` restores the zoom after a swap anyway).
"""

from __future__ import annotations

from litestar.datastructures import MutableScopeHeaders
from litestar.types import BeforeMessageSendHookHandler, Message, Scope

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)
SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
}
"""``X-Frame-Options`` repeats ``frame-ancestors 'none'`` for browsers that predate it."""
STRICT_TRANSPORT_SECURITY = "max-age=31536000"
"""Sent only by a studio served over HTTPS (``wayline studio --secure-cookies``): for a
year, the browser reaches this host over HTTPS only, so a network attacker cannot strip
the studio down to plain HTTP and read its cookie. Not ``includeSubDomains``: the studio
is one host of a domain it does not own, and the header would stop the browser from
reaching every other host under that name over plain HTTP (nor ``preload``, for the same
reason). Over plain HTTP it would be ignored by browsers, and a studio reached that way
sends none: a development studio must not pin ``localhost`` to HTTPS."""


STATIC_PREFIX = "/static/"
"""The studio's own files (scripts, styles), the only responses a browser may keep."""
NOT_STORED = "no-store"
"""Every other response: a page or an answer shows state that changes (a draft's
revision, an instance's position) and may be private. A browser that kept one showed
its first copy on Back: a draft at an old revision, whose next edit was then refused as
if made in another window."""


def security_headers(https: bool) -> BeforeMessageSendHookHandler:
    """The before-send hook of a studio, served over HTTPS (``https``, which adds
    ``Strict-Transport-Security``) or not: it gives a response's start message every
    header it lacks."""
    required = SECURITY_HEADERS | (
        {"Strict-Transport-Security": STRICT_TRANSPORT_SECURITY} if https else {}
    )

    async def add_security_headers(message: Message, scope: Scope) -> None:
        if message["type"] != "http.response.start":
            return
        headers = MutableScopeHeaders.from_message(message)
        for name, value in required.items():
            if name not in headers:
                headers[name] = value
        if "Cache-Control" not in headers and not scope["path"].startswith(STATIC_PREFIX):
            headers["Cache-Control"] = NOT_STORED

    return add_security_headers
