"""Errors the studio's service layer raises; HTML and API routes map them to responses.

Each carries a message a person can act on. ``NotFound`` is also what another team's
object looks like: possessing an id grants nothing, and a 404 does not even confirm
that the object exists.
"""

from __future__ import annotations

from engine.model.errors import WaylineError


class StudioError(WaylineError):
    """Base of the studio's expected errors; ``problems`` may say where (a field's path
    and what is wrong with it)."""

    status = 400

    def __init__(self, message: str, problems: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or []


class NotFound(StudioError):
    status = 404


class Conflict(StudioError):
    """The request clashes with what is stored (a version published with other content,
    a draft changed in another window)."""

    status = 409


class OutcomeUnknown(StudioError):
    """The answer to a commit was lost: what was asked may stand recorded or not. The
    same request again with the same id is the safe way to learn which (answered as a
    replay when it had been recorded); a new id could act twice."""

    status = 503


class Invalid(StudioError):
    """The request's content is not acceptable; ``problems`` may say where."""

    status = 422

    @classmethod
    def at(cls, field: str, message: str) -> Invalid:
        """Refused for what ``field`` holds (as the API names it): the API's
        ``problems`` name it, and a form says it beside that field
        (``studio.forms.beside``)."""
        return cls(message, [{"path": field, "message": message}])

    @classmethod
    def of(cls, problems: list[dict[str, str]]) -> Invalid:
        """Refused for every one of ``problems`` at once (each a ``path`` and a
        ``message``): the message says them all, in order, and a form says each beside
        its field, so one answer lists all there is to correct."""
        return cls("; ".join(p["message"] for p in problems), problems)


class Forbidden(StudioError):
    """The principal may see that the object exists but may not act on it (another
    member's machine execution: only its submitter reads or cancels it)."""

    status = 403


class PasswordChangeRequired(StudioError):
    """Signed in with a one-time password: choose a new one before anything else."""

    status = 403


class BadRequest(StudioError):
    """The request cannot be read as sent: a NUL character, JSON nested too deep, a
    page cursor that is not one, a body field the route does not take. Nothing was
    looked up or changed."""

    status = 400
