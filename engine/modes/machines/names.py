"""The names a machine's manifest uses beside definition names: types and grants.

State families, their variants, the variants' fields and the resource are type-like
names (``Approval``, ``InReview``, ``reminders``, ``Documents``): what a programming
language accepts as a class or field name, so the Python form spells them as they are
written in code. Variant names are also the ``step`` of a machine's events, which they
fit (``engine.model.identifiers.NAME_PATTERN`` is wider).

A grant names a database permission on a resource, ``DbRead<Documents>`` or
``DbWrite<Documents>``. Nothing else can be granted: an advance is retried
transactionally, so it may only make database changes that roll back with its
transition, never an external effect (HTTP, mail, jobs, other workflows) that a retry
would repeat (seed 000).
"""

from __future__ import annotations

import re

from engine.model.limits import MAX_IDENTIFIER_LENGTH

TYPE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
TYPE_NAME_RULE = (
    f"1 to {MAX_IDENTIFIER_LENGTH} characters: ASCII letters, digits or '_', starting with a letter"
)
GRANT_KINDS = ("DbRead", "DbWrite")
GRANT = re.compile(rf"^({'|'.join(GRANT_KINDS)})<([A-Za-z][A-Za-z0-9_]*)>$")
GRANT_RULE = (
    "must be DbRead<Resource> or DbWrite<Resource>: an advance makes only "
    "transactional database changes (no HTTP, mail, jobs or workflows)"
)


def type_name_problem(value: object) -> str | None:
    """Why ``value`` is not a type-like name, or None when it is."""
    if not isinstance(value, str):
        return f"must be a string of {TYPE_NAME_RULE}"
    if len(value) > MAX_IDENTIFIER_LENGTH or not TYPE_NAME.fullmatch(value):
        return f"must be {TYPE_NAME_RULE}"
    return None


def grant_problem(value: object) -> str | None:
    """Why ``value`` is not a grant, or None when it is."""
    if isinstance(value, str) and len(value) <= MAX_IDENTIFIER_LENGTH and GRANT.fullmatch(value):
        return None
    return GRANT_RULE
