"""Reading untrusted JSON documents while collecting every error with its path.

The reader never stops at the first problem: each accessor records a FieldError and
returns None, so a caller can keep reading and report everything at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any, TypeVar

from engine.model.durations import parse_duration
from engine.model.errors import FieldError
from engine.model.words import clipped

T = TypeVar("T")
UNKNOWN_KEY_SHOWN = 64
"""At most this many characters of an unknown field's name are said back in its path
(a document may hold a key of any length; every known field's name is far shorter)."""


def join(path: str, key: str | int) -> str:
    """``steps`` + 2 -> ``steps[2]``; ``steps[2]`` + ``retry`` -> ``steps[2].retry``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


class SpecReader:
    """Collects FieldErrors while typed accessors read fields of JSON objects."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def error(self, path: str, message: str) -> None:
        self.errors.append(FieldError(path, message))

    def object(self, value: Any, path: str, allowed: frozenset[str]) -> dict[str, Any] | None:
        """``value`` as a JSON object whose keys are all in ``allowed``."""
        if not isinstance(value, dict):
            self.error(path, "must be a JSON object")
            return None
        for key in sorted(set(value) - allowed):
            named = join(path, clipped(str(key), UNKNOWN_KEY_SHOWN))
            self.error(named, f"unknown field; allowed: {', '.join(sorted(allowed))}")
        return value

    def required_object(
        self, value: Any, path: str, allowed: frozenset[str], shape: str
    ) -> dict[str, Any] | None:
        """``object``, for a field that must be present; ``shape`` tells what it holds."""
        if value is None:
            self.error(path, f"is required: {shape}")
            return None
        return self.object(value, path, allowed)

    def _required(self, obj: dict[str, Any], key: str, path: str, missing: str) -> tuple[Any, str]:
        """A required field's value and its path; when it is absent, the value is None and
        the error ``missing`` (which says what the field should hold) is recorded."""
        where = join(path, key)
        value = obj.get(key)
        if value is None:
            self.error(where, missing)
        return value, where

    def string(
        self,
        obj: dict[str, Any],
        key: str,
        path: str,
        check: Callable[[Any], str | None] | None = None,
    ) -> str | None:
        value, where = self._required(obj, key, path, "is required")
        if value is None:
            return None
        if not isinstance(value, str):
            self.error(where, "must be a string")
            return None
        problem = check(value) if check else None
        if problem:
            self.error(where, problem)
            return None
        return value

    def integer(self, obj: dict[str, Any], key: str, path: str, low: int, high: int) -> int | None:
        value, where = self._required(
            obj, key, path, f"is required: a whole number from {low} to {high}"
        )
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            self.error(where, f"must be a whole number from {low} to {high}")
            return None
        return value

    def duration(
        self, obj: dict[str, Any], key: str, path: str, maximum: timedelta
    ) -> timedelta | None:
        value, where = self._required(
            obj, key, path, "is required: a duration such as 500ms, 30s, 5m, 72h or 7d"
        )
        if value is None:
            return None
        try:
            parsed = parse_duration(value)
        except ValueError as exc:
            self.error(where, str(exc))
            return None
        if parsed <= timedelta(0) or parsed > maximum:
            self.error(where, f"must be more than 0 and at most {maximum.days} days")
            return None
        return parsed

    def choice(
        self, obj: dict[str, Any], key: str, path: str, options: Mapping[str, T]
    ) -> T | None:
        """One of ``options`` by its name (an enum's values, the installed modes)."""
        value = obj.get(key)
        found = options.get(value) if isinstance(value, str) else None
        if found is None:
            allowed = ", ".join(options)
            self.error(
                join(path, key),
                f"is required: one of {allowed}" if value is None else f"must be one of {allowed}",
            )
        return found

    def boolean(self, obj: dict[str, Any], key: str, path: str, default: bool) -> bool:
        value = obj.get(key, default)
        if not isinstance(value, bool):
            self.error(join(path, key), "must be true or false")
            return default
        return value
