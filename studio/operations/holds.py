"""A team's incident holds in the studio: the list with backlogs, placing one, releasing
it (all, a count of instances or a rate), and the banner every affected page shows.

The engine does the work (``Client.place_hold``, ``Client.release_hold``); here the
form's text becomes its arguments, and the engine's refusals become the studio's
errors: an unknown or another team's hold is NotFound, a released one a Conflict, a
bad amount or reason Invalid with the engine's words.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from engine import (
    DefinitionNotFound,
    FieldRefused,
    HoldNotFound,
    HoldReleased,
    InputRefused,
    ReleaseMode,
    parse_scope,
)
from engine.api.queries import Hold
from engine.decide.audit import reason_problem
from engine.model.holds import release_amount
from studio.errors import Conflict, Invalid, NotFound
from studio.runtime import Runtime

T = TypeVar("T")
SCOPES = ("definition", "team")
"""What a hold covers, as the form names it: a definition (NAME or NAME@VERSION) or the
whole team."""


@dataclass(frozen=True)
class Released:
    """A release's answer: the hold as it is now and how many work items became due."""

    hold: Hold
    due: int


async def banner(runtime: Runtime, team: str, name: str = "", version: str = "") -> list[Hold]:
    """The active holds a page about ``name`` (or ``name@version``) must show; with no
    name (the instances list), every active hold of the team."""
    if name:
        return await runtime.queries.holds_covering(team, name, version)
    return await runtime.queries.holds(team, active_only=True)


async def place(
    runtime: Runtime, team: str, actor: str, scope: str, definition: str, reason: str
) -> Hold:
    """Place a hold on ``definition`` (NAME[@VERSION]) or, for scope ``team``, the team."""
    if scope not in SCOPES:
        raise Invalid.at("scope", f"a hold covers one of: {', '.join(SCOPES)}")
    if scope == "definition" and not definition.strip():
        raise Invalid.at("definition", "name the definition to hold, as NAME or NAME@VERSION")
    _check_reason(reason)
    chosen = definition.strip() if scope == "definition" else None
    return await _refused(lambda: _place(runtime, team, actor, chosen, reason))


async def _place(
    runtime: Runtime, team: str, actor: str, definition: str | None, reason: str
) -> Hold:
    return await runtime.client.place_hold(parse_scope(team, definition), actor, reason)


async def release(
    runtime: Runtime,
    team: str,
    actor: str,
    hold_id: str,
    reason: str,
    count: int | None = None,
    rate: float | None = None,
) -> Released:
    """Release the team's hold: all of it, ``count`` instances, or ``rate`` per second."""
    _check_reason(reason)
    hold, due = await _refused(
        lambda: runtime.client.release_hold(team, hold_id, actor, reason, count=count, rate=rate)
    )
    return Released(hold, due)


def _check_reason(reason: str) -> None:
    """Invalid at ``reason`` for one the engine would refuse (its words), so the API
    names the field and a form can say it beside it."""
    if problem := reason_problem(reason):
        raise Invalid.at("reason", problem)


def form_amounts(mode: str, amount: str) -> tuple[int | None, float | None]:
    """The release form's ``mode`` and ``amount`` as ``release``'s count and rate;
    Invalid, in the engine's words of what is allowed (``release_amount``: a count from
    1 to MAX_RELEASE_COUNT, a rate up to MAX_RELEASE_RATE), for an amount that is not
    one."""
    try:
        chosen = ReleaseMode(mode)
    except ValueError:
        raise Invalid(f"release one of: {', '.join(m.value for m in ReleaseMode)}") from None
    count = _number(amount, int) if chosen is ReleaseMode.COUNT else None
    rate = _number(amount, float) if chosen is ReleaseMode.RATE else None
    try:
        release_amount(chosen, count if rate is None else rate)
    except InputRefused as refused:
        raise Invalid.at("amount", str(refused)) from None
    return count, rate


def _number(text: str, kind: Callable[[str], T]) -> T | None:
    """``text`` as a number of ``kind``; None when it is none (``release_amount``
    then says what would be)."""
    try:
        return kind(text.strip())
    except ValueError:
        return None


async def _refused(action: Callable[[], Awaitable[T]]) -> T:
    """``action``'s result, with the engine's refusals as the studio's errors."""
    try:
        return await action()
    except HoldNotFound as missing:
        raise NotFound(str(missing)) from None
    except HoldReleased as released:
        raise Conflict(str(released)) from None
    except FieldRefused as refused:
        raise Invalid.at(refused.field, str(refused)) from None
    except (InputRefused, DefinitionNotFound) as refused:
        raise Invalid(str(refused)) from None
