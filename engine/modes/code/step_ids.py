"""Step names, journal keys and ``step_id`` (seed 001, "wf.step_id").

``step_id`` is ``<run>/<step>#<occurrence>.<try>``, e.g. ``order-saga/o-42/charge#1.1``:
what a body hands to anything outside the platform that deduplicates (a gateway's
idempotency key, a row id, an object key). Its parts follow the seed's table:

- **occurrence** counts the passes over the same step name (a loop's second pass is
  ``#2``), because each pass is its own effect;
- **try** is 1 plus the *known* failures recorded for that occurrence (a body raised
  ``StepFailure``), because a retry after a known failure is a new effect. An unknown
  outcome (a crash between the effect and its recorded result, a body that raised
  anything else) does not count: the repeat is the same effect and must be recognised.

Step names allow no ``.`` so a journal key such as ``charge.1`` is unambiguous, and no
``/`` or ``#`` so a ``step_id`` parses back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

MAX_STEP_NAME_LENGTH = 100
STEP_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}")
STEP_NAME_RULE = (
    f"1 to {MAX_STEP_NAME_LENGTH} characters: ASCII letters, digits, '_' or '-', "
    "starting with a letter or digit"
)
STEP_ID_PATTERN = re.compile(
    r"(?P<run>[A-Za-z0-9][A-Za-z0-9._:@/+-]*)/(?P<step>[A-Za-z0-9][A-Za-z0-9_-]{0,99})"
    r"#(?P<occurrence>[1-9][0-9]*)\.(?P<try>[1-9][0-9]*)"
)
"""A whole ``step_id`` (use ``fullmatch``)."""


RESERVED_STEP_NAMES = frozenset({"sleep", "spawn", "race", "all", "now", "random", "uuid4"})
"""Names other verbs' journal keys begin with (``sleep.1``, ``spawn.2``): a step so named
would share their keys (``spawn.1`` the step and ``spawn.1`` the spawn)."""


def step_name_problem(name: object) -> str | None:
    """Why ``name`` cannot name a step, or None when it can."""
    if isinstance(name, str) and name in RESERVED_STEP_NAMES:
        reserved = ", ".join(sorted(RESERVED_STEP_NAMES))
        return f"a step name may not be one of {reserved}: those name other verbs' journal keys"
    if isinstance(name, str) and STEP_NAME_PATTERN.fullmatch(name):
        return None
    return f"a step name must be {STEP_NAME_RULE}"


def step_key(name: str, occurrence: int) -> str:
    """The journal key of a step's occurrence: ``charge.1``."""
    return f"{name}.{occurrence}"


def try_number(known_failures: int) -> int:
    """The try of the next attempt of an occurrence: 1 plus its recorded known failures."""
    return 1 + known_failures


@dataclass(frozen=True)
class StepId:
    run_id: str
    step: str
    occurrence: int
    attempt_try: int

    def __str__(self) -> str:
        return f"{self.run_id}/{self.step}#{self.occurrence}.{self.attempt_try}"


def step_id(run_id: str, step: str, occurrence: int, known_failures: int = 0) -> str:
    """``<run>/<step>#<occurrence>.<try>`` for the next attempt of an occurrence."""
    return str(StepId(run_id, step, occurrence, try_number(known_failures)))


def step_id_after(run_id: str, step: str, occurrence: int, known: Iterable[bool]) -> str:
    """The ``step_id`` of the attempt after ``known``: one flag per earlier attempt of
    the occurrence, True when it recorded a known failure, False when its outcome was
    unknown (only the former changes the try)."""
    return step_id(run_id, step, occurrence, sum(1 for flag in known if flag))


def parse_step_id(text: str) -> StepId:
    """The parts of a ``step_id``; ValueError naming the expected form otherwise."""
    match = STEP_ID_PATTERN.fullmatch(text) if isinstance(text, str) else None
    if not match:
        raise ValueError("a step_id reads <run>/<step>#<occurrence>.<try>, e.g. o/o-42/charge#1.1")
    return StepId(match["run"], match["step"], int(match["occurrence"]), int(match["try"]))
