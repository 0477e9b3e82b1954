"""The types a state's fields and a machine's input may have, and their JSON values.

A state is persisted as the canonical JSON of its fields, and replay checks every
entered state against its variant's declared fields, so the types are the ones JSON
holds exactly: text, whole numbers, numbers and booleans. The Python form declares
them with the built-in types; anything else is passed on by name so that validation
reports it with the field's path, beside every other problem of the manifest.
"""

from __future__ import annotations

from typing import Any

FIELD_TYPES: dict[str, type] = {"text": str, "integer": int, "number": float, "boolean": bool}
"""Each type's name in a manifest, and the Python type that declares it."""

_NAMES = {python: name for name, python in FIELD_TYPES.items()}
_SAYS = {
    "text": "text",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
}


def type_name(python: Any) -> str:
    """The manifest's name for a Python type (an unknown type keeps its own name)."""
    return _NAMES.get(python) or getattr(python, "__name__", repr(python))


def value_problem(type_name: str, value: Any) -> str | None:
    """Why ``value`` (decoded JSON) is not of the manifest type ``type_name``, or None."""
    if type_name == "integer":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif type_name == "number":
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    else:
        ok = isinstance(value, FIELD_TYPES[type_name])
    return None if ok else f"must be {_SAYS[type_name]}"
