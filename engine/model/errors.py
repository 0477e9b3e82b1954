"""Errors the engine raises, each with a message a user can act on.

Messages never carry driver text, credentials or payload bytes; a lower-level cause
stays chained (``raise ... from cause``) for logs only.
"""

from __future__ import annotations

from dataclasses import dataclass


class WaylineError(Exception):
    """Base of every error the engine raises on purpose."""


@dataclass(frozen=True)
class FieldError:
    """One problem with one field, located by its JSON path (``steps[2].retry``)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class DefinitionInvalid(WaylineError):
    """A definition failed validation; ``errors`` lists every problem at once."""

    def __init__(self, errors: list[FieldError]) -> None:
        self.errors = tuple(errors)
        lines = "\n".join(f"  {e}" for e in self.errors)
        super().__init__(f"definition is invalid ({len(self.errors)} errors):\n{lines}")


class DefinitionFileError(WaylineError):
    """A definition file that cannot be used at all (unreadable, not JSON); the message
    is one line for users."""


class RegistryError(WaylineError):
    """A registry could not be built or could not resolve a definition."""


class DefinitionNotFound(RegistryError):
    """No registered definition has this name and version."""


class FingerprintMismatch(RegistryError):
    """A definition with this name and version exists, but with another fingerprint."""


class EventInvalid(WaylineError):
    """An event carries fields its kind does not allow, or lacks ones it needs."""


class ReplayRejected(WaylineError):
    """A history cannot be replayed: it breaks a rule of the model at one event."""

    def __init__(self, sequence: int, message: str) -> None:
        self.sequence = sequence
        self.reason = message
        super().__init__(f"event {sequence}: {message}")


class TransitionInvalid(WaylineError):
    """A transition breaks a structural rule or a bound before it reaches a store."""


class DecisionRejected(WaylineError):
    """A command or decision is not allowed in the instance's current state."""


class SignalConflict(WaylineError):
    """This signal step already holds another signal, or this signal id other payload."""


class CommandConflict(WaylineError):
    """This command id already names another command (action, actor or reason) on the
    instance: a repeat acts once only when it is the same command."""


class LimitExceeded(WaylineError):
    """A value is larger than a named limit allows."""


class InputRefused(WaylineError, ValueError):
    """A value from outside cannot be taken as given: not JSON, nested too deep, or
    holding text PostgreSQL cannot store (a NUL character, a lone surrogate)."""


class FieldRefused(InputRefused):
    """InputRefused for one named argument (``field``, as the caller sent it: ``parent``,
    ``input``, ``key``), so that an API can say at which field it was refused."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class NotJSON(InputRefused):
    """Text that is not JSON at all (a syntax error, bytes that are not UTF-8)."""


class ActivityAppNotFound(WaylineError):
    """A ``MODULE:REGISTRY`` spec that does not name an importable ActivityRegistry."""
