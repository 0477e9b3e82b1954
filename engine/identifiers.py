"""The two shapes of identifier the engine accepts, and their checks.

Names (definition names and versions, step names, activity targets) may not contain
``/`` or ``:``: derived identities such as idempotency keys join them with ``/`` and
must stay unambiguous. Ids (instance, signal, command, worker, actor) are opaque and
may contain them.
"""

from __future__ import annotations

import re

from engine.limits import MAX_IDENTIFIER_LENGTH, MAX_KEY_LENGTH

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@/+-]*$")
NAME_RULE = (
    f"1 to {MAX_IDENTIFIER_LENGTH} characters: letters, digits, '.', '_' or '-', "
    "starting with a letter or digit"
)
ID_RULE = (
    f"1 to {MAX_IDENTIFIER_LENGTH} characters: letters, digits and . _ : @ / + -, "
    "starting with a letter or digit"
)


def name_problem(value: object) -> str | None:
    """Why ``value`` is not a valid name, or None when it is."""
    return _problem(value, NAME_PATTERN, NAME_RULE)


def id_problem(value: object) -> str | None:
    """Why ``value`` is not a valid id, or None when it is."""
    return _problem(value, ID_PATTERN, ID_RULE)


def key_problem(value: object) -> str | None:
    """Why ``value`` is not a valid derived key (an id up to MAX_KEY_LENGTH), or None."""
    rule = ID_RULE.replace(str(MAX_IDENTIFIER_LENGTH), str(MAX_KEY_LENGTH))
    return _problem(value, ID_PATTERN, rule, MAX_KEY_LENGTH)


def _problem(
    value: object, pattern: re.Pattern[str], rule: str, limit: int = MAX_IDENTIFIER_LENGTH
) -> str | None:
    if not isinstance(value, str):
        return f"must be a string of {rule}"
    if len(value) > limit or not pattern.fullmatch(value):
        return f"must be {rule}"
    return None


def require_id(value: object, what: str) -> str:
    """Return ``value`` when it is a valid id; raise ValueError naming ``what`` otherwise."""
    problem = id_problem(value)
    if problem:
        raise ValueError(f"{what} {problem}")
    return value  # type: ignore[return-value]
