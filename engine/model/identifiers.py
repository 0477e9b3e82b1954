"""The two shapes of identifier the engine accepts, and their checks.

Names (definition names and versions, step names, activity targets) may not contain
``/`` or ``:``: derived identities such as idempotency keys join them with ``/`` and
must stay unambiguous. Ids (instance, signal, command, worker, actor) are opaque and
may contain them.

Instance ids are chosen per team: a team's id is stored as ``<team>:<id>``
(``team_instance_id``), so two teams may both run ``order-1``, and no team can take,
or learn of, an id another team uses. Everything derived from an instance id (a
child's ``<parent>/<step>``, transition, work and idempotency keys) inherits the
team's prefix. The engine's own callers (the command line, tests, drills) are the
team ``''`` and use ids as they are. Namespacing the ids, rather than making the
primary key (tenant, id), keeps every table, statement and index of the write path
as it is (all of them are keyed by instance id first, migration 0027); the studio is
the only place that turns a team's id into its stored form and back
(``local_instance_id``).
"""

from __future__ import annotations

import re

from engine.model.limits import MAX_CODE_LENGTH, MAX_IDENTIFIER_LENGTH, MAX_KEY_LENGTH

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@/+-]*$")
STEP_ID_PATTERN = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9._:@/+-]*/[A-Za-z0-9][A-Za-z0-9._-]*#[0-9]+\.[0-9]+$"
)
"""A code-first step's ``step_id``, ``<run>/<step>#<occurrence>.<try>``: the idempotency
key of its attempts (``#`` is what ids may not contain, so it cannot be mistaken)."""
NAME_RULE = (
    f"1 to {MAX_IDENTIFIER_LENGTH} characters: ASCII letters, digits, '.', '_' or '-', "
    "starting with a letter or digit"
)


def _id_rule(length: int) -> str:
    """What ``ID_PATTERN`` admits, up to ``length`` characters, as a message says it."""
    return (
        f"1 to {length} characters: ASCII letters, digits and . _ : @ / + -, "
        "starting with a letter or digit"
    )


ID_RULE = _id_rule(MAX_IDENTIFIER_LENGTH)
KEY_RULE = _id_rule(MAX_KEY_LENGTH)


def name_problem(value: object) -> str | None:
    """Why ``value`` is not a valid name, or None when it is."""
    return _problem(value, NAME_PATTERN, NAME_RULE)


def id_problem(value: object) -> str | None:
    """Why ``value`` is not a valid id, or None when it is."""
    return _problem(value, ID_PATTERN, ID_RULE)


def key_problem(value: object) -> str | None:
    """Why ``value`` is not a valid derived key (an id up to MAX_KEY_LENGTH), or None."""
    return _problem(value, ID_PATTERN, KEY_RULE, MAX_KEY_LENGTH)


def step_id_problem(value: object) -> str | None:
    """Why ``value`` is not a step_id (``STEP_ID_PATTERN``, up to MAX_KEY_LENGTH), or None."""
    if isinstance(value, str) and len(value) <= MAX_KEY_LENGTH and STEP_ID_PATTERN.fullmatch(value):
        return None
    return f"must be <run>/<step>#<occurrence>.<try> of at most {MAX_KEY_LENGTH} characters"


def signal_id_problem(value: object) -> str | None:
    """Why ``value`` cannot be a signal's id, or None: an id of up to MAX_KEY_LENGTH
    characters, or a step_id (a step's body may send its own key as the id)."""
    problem = key_problem(value)
    return problem if problem and step_id_problem(value) else None


CODE_RULE = f"1 to {MAX_CODE_LENGTH} (MAX_CODE_LENGTH) printable characters, not only spaces"


def code_problem(value: object) -> str | None:
    """Why ``value`` cannot be a new outcome's or resolution's code (an event's ``code``:
    an ActivityFailure's, an UnknownOutcome's, a compensation settled by hand), or None.
    Codes are short words a person reads in a history line, so no control character."""
    if not isinstance(value, str):
        return f"must be a str, not a {type(value).__name__}: {CODE_RULE}"
    if len(value) > MAX_CODE_LENGTH or not value.strip() or not value.isprintable():
        return f"must be {CODE_RULE}"
    return None


def _problem(
    value: object, pattern: re.Pattern[str], rule: str, limit: int = MAX_IDENTIFIER_LENGTH
) -> str | None:
    if not isinstance(value, str):
        return f"must be a string of {rule}"
    if len(value) > limit or not pattern.fullmatch(value):
        return f"must be {rule}"
    return None


TEAM_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
"""A team id (the studio's teams, the engine's tenants). It names export files and
prefixes stored instance ids, so it holds no separator, no path and no space."""
TEAM_RULE = "1 to 63 characters: a-z, 0-9 or '-', starting with a letter or digit"
TEAM_SEPARATOR = ":"
"""Between a team and its own instance id in the stored id. Team ids cannot contain it
(``TEAM_PATTERN``), so the team of a stored id is never ambiguous."""


def team_problem(value: object) -> str | None:
    """Why ``value`` is not a team, or None when it is ('' is the engine's own team)."""
    if value == "":
        return None
    if not isinstance(value, str) or not TEAM_PATTERN.fullmatch(value):
        return f"a team id has {TEAM_RULE} (or is empty: the engine's own team)"
    return None


def team_instance_id(team: str, instance_id: str) -> str:
    """The stored id of ``team``'s instance ``instance_id`` (as it is for team '')."""
    return f"{team}{TEAM_SEPARATOR}{instance_id}" if team else instance_id


def team_id_problem(team: str, instance_id: object) -> str | None:
    """Why ``instance_id`` cannot be one of ``team``'s ids, or None: not an id
    (``id_problem``), or too long once the team's prefix is added (``team_instance_id``)."""
    if problem := id_problem(instance_id):
        return problem
    limit = MAX_IDENTIFIER_LENGTH - len(team_instance_id(team, ""))
    length = len(instance_id)  # type: ignore[arg-type]
    if length > limit:
        return f"is {length} characters; this team's ids have at most {limit}"
    return None


def local_instance_id(team: str, stored_id: str) -> str:
    """The id ``team`` knows its instance by: ``stored_id`` without the team's prefix
    (an instance stored before ids were namespaced has none, and keeps its id)."""
    prefix = team_instance_id(team, "")
    return stored_id[len(prefix) :] if team and stored_id.startswith(prefix) else stored_id


def split_pin(text: str) -> tuple[str, str | None]:
    """``NAME[@VERSION]`` as (name, version, None for the latest); ValueError for a name
    that is not one, or an '@' with no version after it, which must not read as "the
    latest version" (a typo would act on another version than the one meant)."""
    name, at, version = text.partition("@")
    if problem := name_problem(name):
        raise ValueError(f"the definition name {problem}")
    if at and not version:
        raise ValueError("name a version after @, or leave the @ out")
    return name, version or None


def require_id(value: object, what: str) -> str:
    """Return ``value`` when it is a valid id; raise ValueError naming ``what`` otherwise."""
    problem = id_problem(value)
    if problem:
        raise ValueError(f"{what} {problem}")
    return value  # type: ignore[return-value]
