"""Sign-in, sign-out, and a person's own account page.

The sign-in form is protected from login CSRF (a foreign site signing the browser into
an attacker's account) by a double-submit token: a random cookie scoped to /login that
the form must echo. The session cookie is HttpOnly and SameSite=Lax, and Secure when
the studio says it is served over HTTPS.
"""

from __future__ import annotations

import hmac
import secrets

from litestar import Request
from litestar.datastructures import Cookie
from litestar.di import NamedDependency
from litestar.exceptions import PermissionDeniedException
from litestar.params import FromQuery
from litestar.response import Redirect, Template

from studio.access import maybe_principal
from studio.accounts import service as accounts
from studio.accounts import signin, signin_limits
from studio.accounts.sessions import COOKIE
from studio.accounts.signin_limits import SignInThrottled
from studio.errors import Invalid
from studio.forms import beside
from studio.principal import Principal
from studio.rendering import form_values, page, see_other
from studio.runtime import Runtime

LOGIN_COOKIE = "wayline_login"
LOGIN_FIELD = "_login"
HOME = "/definitions"
"""Where signing in (and a first own password) leads: the team's definitions."""


def _safe_next(target: str | None) -> str:
    """Only local paths: a sign-in link must not redirect anywhere else."""
    if target and target.startswith("/") and not target.startswith(("//", "/\\")):
        return target
    return HOME


SESSION_ENDED = "Your session has ended. Sign in again to go on where you were."


def _login_page(
    request: Request,
    next_path: str,
    error: str = "",
    status: int = 200,
    username: str = "",
    notice: str = "",
) -> Template:
    return _form_page(
        request, "signin/login.html", status, next_path=next_path, error=error,
        username=username, notice=notice,
    )  # fmt: skip


def _form_page(request: Request, template: str, status: int, **context: str) -> Template:
    """A public form (sign in, join) carrying a fresh login token, and its cookie."""
    token = secrets.token_urlsafe(24)
    response = page(request, template, status=status, login_token=token, **context)
    response.cookies.append(
        Cookie(
            key=LOGIN_COOKIE,
            value=token,
            path="/login",
            httponly=True,
            samesite="strict",
            secure=request.app.state.settings.secure_cookies,
        )
    )
    return response


async def login_page(
    request: Request, next: FromQuery[str | None] = None, ended: FromQuery[str | None] = None
) -> Template | Redirect:
    """The sign-in form; ``ended``: a page was asked for with a session that has ended,
    which the form says above it."""
    if maybe_principal(request) is not None:
        return see_other(_safe_next(next))
    return _login_page(request, _safe_next(next), notice=SESSION_ENDED if ended else "")


async def _public_form(request: Request) -> dict[str, str]:
    """The posted values of a sign-in or join form, once its login token matches."""
    values = await form_values(request)
    expected = request.cookies.get(LOGIN_COOKIE, "")
    sent = values.get(LOGIN_FIELD, "")
    if not expected or not hmac.compare_digest(sent, expected):
        raise PermissionDeniedException("the sign-in form expired; reload the page and try again")
    return values


def _client(request: Request) -> str:
    """The address sign-in limits count against (``signin_limits.client_address``)."""
    return signin_limits.client_address(
        request.client.host if request.client else "unknown",
        request.headers.get("x-forwarded-for", ""),
        request.app.state.trusted_proxies,
    )


def _attempt(request: Request, runtime: Runtime) -> signin.Attempt:
    """This request as a sign-in attempt, bounded by the studio's settings."""
    settings = runtime.settings
    return signin.Attempt(
        runtime.store,
        settings.signin_limits,
        settings.session_ttl,
        _client(request),
        request.cookies.get(COOKIE, ""),
    )


def _session_cookie(request: Request, value: str) -> Cookie:
    settings = request.app.state.settings
    return Cookie(
        key=COOKIE,
        value=value,
        path="/",
        httponly=True,
        samesite="lax",
        secure=settings.secure_cookies,
        max_age=int(settings.session_ttl.total_seconds()),
    )


def _sentence(refusal: Exception) -> str:
    """A refusal's message as the sentence a page shows."""
    return str(refusal).capitalize() + "."


def _throttled(response: Template, throttled: SignInThrottled) -> Template:
    response.headers["Retry-After"] = str(throttled.retry_after)
    return response


async def login(request: Request, runtime: NamedDependency[Runtime]) -> Template | Redirect:
    values = await _public_form(request)
    username = values.get("username", "")
    next_path = _safe_next(values.get("next"))
    attempt = _attempt(request, runtime)
    try:
        done = await signin.sign_in(attempt, username, values.get("password", ""))
    except SignInThrottled as throttled:
        page = _login_page(request, next_path, _sentence(throttled), 429, username)
        return _throttled(page, throttled)
    except signin.SignInFailed:
        return _login_page(request, next_path, "Wrong username or password.", 401, username)
    target = "/account" if done.user.must_change_password else next_path
    return Redirect(target, status_code=303, cookies=[_session_cookie(request, done.cookie)])


async def join_page(request: Request) -> Template:
    return _join_page(request)


def _join_page(
    request: Request, status: int = 200, username: str = "", code: str = "", error: str = ""
) -> Template:
    """The join form; a refused one comes back with the username and the code as typed
    (a code is long: pasting it again after a refused password was the form's toll)."""
    return _form_page(
        request, "signin/join.html", status, username=username, code=code, error=error
    )


async def join(request: Request, runtime: NamedDependency[Runtime]) -> Template | Redirect:
    """Redeem an invitation code (``studio.accounts.invitations``) and sign in to its team."""
    values = await _public_form(request)
    username = values.get("username", "")
    code, password = values.get("code", ""), values.get("password", "")
    try:
        done = await signin.join(_attempt(request, runtime), username, code, password)
    except SignInThrottled as throttled:
        page = _join_page(request, 429, username, code, _sentence(throttled))
        return _throttled(page, throttled)
    except (signin.JoinFailed, signin.JoinRejected) as refused:
        return _join_page(request, 422, username, code, _sentence(refused))
    return Redirect(HOME, status_code=303, cookies=[_session_cookie(request, done.cookie)])


async def logout(
    principal: NamedDependency[Principal], runtime: NamedDependency[Runtime]
) -> Redirect:
    if principal.session is not None:
        await signin.sign_out(runtime.store, principal.session)
    response = see_other("/login")
    response.delete_cookie(COOKIE, path="/")
    return response


async def home(request: Request) -> Redirect:
    return see_other(HOME)


async def account_page(request: Request) -> Template:
    return page(request, "signin/account.html", "settings")


async def change_password(
    request: Request, principal: NamedDependency[Principal], runtime: NamedDependency[Runtime]
) -> Template | Redirect:
    values = await form_values(request)
    try:
        cookie = await accounts.change_password(
            _attempt(request, runtime),
            principal,
            values.get("current", ""),
            values.get("new", ""),
            values.get("confirm", ""),
        )
    except Invalid as invalid:  # said beside its field; a password is never shown again
        refused = page(
            request, "signin/account.html", "settings", status=invalid.status,
            error=str(invalid), field_errors=beside(invalid),
        )  # fmt: skip
        if isinstance(invalid, accounts.PasswordGuessesThrottled):
            refused.headers["Retry-After"] = str(invalid.retry_after)
        return refused
    # A first password (replacing the one-time one) was the only thing in the way: go on.
    done = see_other(HOME if principal.must_change_password else "/account?changed=1")
    done.cookies.append(_session_cookie(request, cookie))
    return done


async def switch_team(
    request: Request, principal: NamedDependency[Principal], runtime: NamedDependency[Runtime]
) -> Redirect:
    values = await form_values(request)
    await accounts.switch_team(runtime.store, principal, values.get("team", ""))
    return see_other(_safe_next(values.get("next")))
