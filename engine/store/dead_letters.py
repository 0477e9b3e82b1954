"""Dead letters: listing unresolved ones, and resolving each fence exactly once.

A dead letter is a work row in state 4 (a processor gave up on it, or its deadline
passed). Its fence is (work_id, lease_token), found by the work's key (instance_id,
work_id). An operator resolves a fence with an
audited command, retry (readmit at ``retry_at`` with a new deadline) or discard, and
each fence is resolved at most once:

- the command is fingerprinted over its complete content; the same command id (within
  its instance: resolutions are keyed (instance_id, command_id), migration 0027) with the
  same fingerprint is an exact replay (success, nothing written, so a caller whose
  COMMIT was lost simply sends the command again), with another fingerprint a
  ResolutionConflict;
- the work row is locked where it is still that fence's dead letter; otherwise the
  token is stale (StaleLease), unless the command itself committed meanwhile;
- a second, different command for a fence still dead-lettered conflicts on the
  resolutions table's (instance_id, work_id, lease_token) key.

A retry returns the row to available with the new times and clears the failure; the
token is unchanged, so the next claim bumps it, and if that lease dead-letters again it
is a new fence that appears in the list again. A retry may readmit work before its
instance wants it (an attempt in its backoff, a timer not yet due): the processor that
claims it releases it until then, or dead-letters it again when the new deadline comes
first (``engine.worker.processors``). Discarded dead letters stay in state 4
with their resolution row; the list skips them (``NOT EXISTS`` on the resolutions key),
which costs one index probe per discarded row scanned.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from functools import cached_property
from typing import Any

import psycopg

from engine.decide.audit import actor_problem, reason_problem
from engine.model.canonical import digest, format_instant, utc
from engine.model.identifiers import id_problem
from engine.model.limits import (
    DEFAULT_DEADLINE_IN,
    DEFAULT_RETRY_IN,
    MAX_DEADLINE_IN,
    MAX_KEY_LENGTH,
    MAX_PAGE_ITEMS,
    MAX_RETRY_IN,
)
from engine.model.transitions import WorkKind
from engine.store.errors import CorruptStore, StaleLease, StoreError
from engine.store.leases import WorkRequestInvalid
from engine.store.rows import payload_fields, payload_text, work_kind
from engine.store.statements import dead_letters as sql
from engine.store.statements import transitions as transition_sql
from engine.store.store import Store
from engine.store.transactions import transact


class ResolutionAction(StrEnum):
    RETRY = "retry"
    DISCARD = "discard"


ACTION_CODES = {ResolutionAction.RETRY: 1, ResolutionAction.DISCARD: 2}
"""How each action is stored in ``work_resolutions.action``."""
ACTION_OF_CODE = {code: action for action, code in ACTION_CODES.items()}
"""Each stored ``work_resolutions.action`` read back as its action."""


RESOLUTION_KINDS = {
    ResolutionAction.RETRY: "dead_letter_retried",
    ResolutionAction.DISCARD: "dead_letter_discarded",
}
"""How ``Resolution.to_json`` names each action."""


class ResolutionConflict(StoreError):
    """The command id or the fence was already used by a different resolution."""


@dataclass(frozen=True)
class DeadLetter:
    """An unresolved dead letter; ``token`` names the fence a resolution must present."""

    work_id: str
    kind: WorkKind | int
    instance_id: str
    sequence: int
    tenant_id: str
    target: str
    token: int
    attempts: int
    failure_code: str
    failed_at: datetime
    deadline: datetime
    payload: str | None
    failure_detail: str = ""
    """What the code cannot say (a code workflow's journal divergence), or ''."""

    @property
    def step(self) -> str:
        """The step its payload names, or '' (a decision, or a payload that is no JSON
        object: a poison one): what an operator reads beside its kind."""
        return str(payload_fields(self.payload).get("step", ""))


@dataclass(frozen=True)
class DeadLetterCursor:
    """Where a page ended: the next page starts strictly after (failed_at, work_id)."""

    failed_at: datetime
    work_id: str


@dataclass(frozen=True)
class DeadLetterPage:
    """One keyset page of dead letters, oldest failure first."""

    items: tuple[DeadLetter, ...]
    next_cursor: DeadLetterCursor | None
    """None when no later dead letter existed when the page was read."""


@dataclass(frozen=True)
class Resolution:
    """An audited resolution command; build with ``make_resolution`` so it is checked."""

    command_id: str
    instance_id: str
    work_id: str
    token: int
    action: ResolutionAction
    actor: str
    reason: str
    occurred_at: datetime
    retry_at: datetime | None = None
    deadline: datetime | None = None

    @cached_property
    def fingerprint(self) -> str:
        """SHA-256 of the canonical JSON of the complete command. The instance id is left
        out: the work id is derived from it (``transitions.derived_from``), so the
        content is the same, and commands recorded before migration 0027 added it keep
        their fingerprints (a replay of one stays a replay)."""
        return digest(
            {
                "command_id": self.command_id,
                "work_id": self.work_id,
                "token": self.token,
                "action": self.action.value,
                "actor": self.actor,
                "reason": self.reason,
                "occurred_at": format_instant(self.occurred_at),
                "retry_at": _instant(self.retry_at),
                "deadline": _instant(self.deadline),
            }
        )

    def to_json(self) -> dict[str, Any]:
        """The exchange form, beside its instance's events in a retention export (no
        event records a resolution): ``kind`` is ``dead_letter_retried`` or
        ``dead_letter_discarded``, never an event's kind, and there is no ``sequence``."""
        out: dict[str, Any] = {
            "instance_id": self.instance_id,
            "kind": RESOLUTION_KINDS[self.action],
            "occurred_at": format_instant(self.occurred_at),
            "command_id": self.command_id,
            "work_id": self.work_id,
            "fencing_token": self.token,
            "actor": self.actor,
            "reason": self.reason,
        }
        if self.retry_at is not None and self.deadline is not None:
            out["retry_at"] = format_instant(self.retry_at)
            out["deadline"] = format_instant(self.deadline)
        return out

    def repeats(self, earlier: Resolution) -> bool:
        """Whether this command is ``earlier`` given again: the same command id, dead
        letter, action, actor and reason. Only the times may differ, since a command
        given again later (after an unknown outcome, say) reads the clock again and its
        default retry times with it; what ``earlier`` recorded stands."""
        return all(getattr(self, name) == getattr(earlier, name) for name in REPEATED_FIELDS)


REPEATED_FIELDS = ("command_id", "instance_id", "work_id", "token", "action", "actor", "reason")
"""What a resolution given again must keep to be the same command (``Resolution.repeats``)."""


@dataclass(frozen=True)
class ResolutionResult:
    command_id: str
    replayed: bool = False
    """True when this command had been committed before (nothing was written)."""
    recorded: Resolution | None = None
    """The resolution as it stands committed: the command, or for a repeat given later,
    the one recorded first (its times)."""


# SQL ----------------------------------------------------------------------------------


# Listing ------------------------------------------------------------------------------


async def list_dead_letters(
    store: Store,
    after: DeadLetterCursor | None = None,
    limit: int = MAX_PAGE_ITEMS,
    tenant: str | None = None,
    failure_code: str | None = None,
) -> DeadLetterPage:
    """Unresolved dead letters after ``after``, oldest failure first, at most ``limit``.

    Keyset-paged on (failed_at, work_id) with one row of look-ahead, so a page that is
    exactly full says there is no next page. Membership can change between pages (a
    resolution removes a row, a new dead letter is added at the end). ``tenant`` keeps
    one team's (``work_tenant_dead_letter_idx``), ``failure_code`` one kind of failure.
    """
    _check_limit(limit, "page limit")
    params = {
        "tenant": tenant,
        "code": failure_code,
        "after_at": None if after is None else utc(after.failed_at),
        "after_id": None if after is None else after.work_id,
        "limit": limit + 1,
    }
    async with store.connection() as conn:
        rows = await (await conn.execute(sql.DEAD_LETTER_PAGE, params)).fetchall()
        await conn.rollback()
    items = tuple(_dead_letter(row) for row in rows[:limit])
    _check_order(after, items)
    more = len(rows) > limit and items
    cursor = DeadLetterCursor(items[-1].failed_at, items[-1].work_id) if more else None
    return DeadLetterPage(items, cursor)


@dataclass(frozen=True)
class DeadLetterGroup:
    """Unresolved dead letters sharing a failure code and a definition version."""

    failure_code: str
    definition_name: str
    definition_version: str
    count: int
    first_failed_at: datetime
    last_failed_at: datetime


DEFAULT_GROUP_SCAN = 1_000


async def dead_letter_groups(
    store: Store, tenant: str | None = None, scan: int = DEFAULT_GROUP_SCAN
) -> list[DeadLetterGroup]:
    """Groups of the oldest ``scan`` unresolved dead letters, largest group first."""
    if isinstance(scan, bool) or not isinstance(scan, int) or not 1 <= scan <= 10_000:
        raise WorkRequestInvalid("the group scan must be from 1 to 10000 dead letters")
    async with store.connection() as conn:
        cur = await conn.execute(sql.DEAD_LETTER_GROUPS, {"tenant": tenant, "scan": scan})
        rows = await cur.fetchall()
    return [
        DeadLetterGroup(code, name, version, count, utc(first), utc(last))
        for code, name, version, count, first, last in rows
    ]


ResolutionRecord = Resolution
"""A committed resolution as the audit shows it: the command, with the instance whose
work it resolved."""


async def recent_resolutions(
    store: Store, tenant: str | None = None, limit: int = MAX_PAGE_ITEMS
) -> list[ResolutionRecord]:
    """The newest ``limit`` resolutions (of ``tenant``'s work when given)."""
    _check_limit(limit)
    async with store.connection() as conn:
        cur = await conn.execute(sql.RECENT_RESOLUTIONS, {"tenant": tenant, "limit": limit})
        rows = await cur.fetchall()
    return [_resolution_record(row) for row in rows]


async def find_resolution(
    store: Store, instance_id: str, command_id: str
) -> ResolutionRecord | None:
    """The committed resolution with this command id on work of ``instance_id``, if any
    (a caller whose repeat was refused as a conflict learns whether it was its own
    command that had acted)."""
    key = {"instance": instance_id, "command": command_id}
    async with store.connection() as conn:
        row = await (await conn.execute(sql.RESOLUTION_RECORD, key)).fetchone()
    return None if row is None else _resolution_record(row)


async def instance_resolutions(store: Store, instance_id: str) -> list[ResolutionRecord]:
    """Every resolution of ``instance_id``'s dead letters, oldest first: the audit of them
    that its history does not hold (retention exports it with the history)."""
    async with store.reading() as conn:
        found = await conn.execute(sql.INSTANCE_RESOLUTIONS, {"instance": instance_id})
        rows = await found.fetchall()
    return [_resolution_record(row) for row in rows]


async def latest_instance_resolutions(
    store: Store, instance_id: str, limit: int = MAX_PAGE_ITEMS
) -> list[ResolutionRecord]:
    """The newest ``limit`` resolutions of ``instance_id``'s dead letters, newest first:
    the part of its operators' audit trail that its history does not hold."""
    _check_limit(limit)
    async with store.reading() as conn:
        found = await conn.execute(
            sql.LATEST_INSTANCE_RESOLUTIONS, {"instance": instance_id, "limit": limit}
        )
        rows = await found.fetchall()
    return [_resolution_record(row) for row in rows]


def _check_limit(limit: int, what: str = "limit") -> None:
    """WorkRequestInvalid unless ``limit`` is a whole number of rows from 1 to
    MAX_PAGE_ITEMS (a bool is not one), as every list of dead letters and resolutions
    takes."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE_ITEMS:
        raise WorkRequestInvalid(f"{what} must be from 1 to MAX_PAGE_ITEMS ({MAX_PAGE_ITEMS})")


def _resolution_record(row: tuple[Any, ...]) -> ResolutionRecord:
    command, work, instance, token, action, actor, reason, at, retry, deadline = row
    return ResolutionRecord(
        command,
        instance,
        work,
        token,
        ACTION_OF_CODE[action],
        actor,
        reason,
        utc(at),
        None if retry is None else utc(retry),
        None if deadline is None else utc(deadline),
    )


def _dead_letter(row: tuple[Any, ...]) -> DeadLetter:
    (work_id, kind, instance, sequence, tenant, target, token, attempts, code) = row[:9]
    failed_at, deadline, payload, detail = row[9:]
    return DeadLetter(
        work_id=work_id,
        kind=work_kind(kind),
        instance_id=instance,
        sequence=sequence,
        tenant_id=tenant,
        target=target,
        token=token,
        attempts=attempts,
        failure_code=code,
        failed_at=utc(failed_at),
        deadline=utc(deadline),
        payload=payload_text(payload),
        failure_detail=detail,
    )


def _check_order(after: DeadLetterCursor | None, items: tuple[DeadLetter, ...]) -> None:
    """A page must be strictly ordered after its cursor; anything else is corruption."""
    previous = None if after is None else (utc(after.failed_at), after.work_id)
    for item in items:
        key = (item.failed_at, item.work_id)
        if previous is not None and key <= previous:
            raise CorruptStore(f"dead-letter page is out of order at work {item.work_id}")
        previous = key


# Resolving ----------------------------------------------------------------------------


def make_resolution(
    command_id: str,
    instance_id: str,
    work_id: str,
    token: int,
    action: ResolutionAction | str,
    actor: str,
    reason: str,
    occurred_at: datetime,
    retry_at: datetime | None = None,
    deadline: datetime | None = None,
) -> Resolution:
    """Check every field of a resolution command; WorkRequestInvalid names the first problem.

    ``instance_id`` and ``work_id`` are the dead letter's key, as its listing shows them.
    Retry needs ``occurred_at <= retry_at < deadline``; discard takes neither time.
    """
    if problem := id_problem(command_id):
        raise WorkRequestInvalid(f"command id {problem}")
    if problem := actor_problem(actor):
        raise WorkRequestInvalid(problem)
    _check_key(instance_id, "instance id")
    _check_key(work_id, "work id")
    if isinstance(token, bool) or not isinstance(token, int) or token < 1:
        raise WorkRequestInvalid("a dead letter's fencing token is an integer of at least 1")
    if problem := reason_problem(reason):
        raise WorkRequestInvalid(problem)
    try:
        kind = ResolutionAction(action)
    except ValueError:
        raise WorkRequestInvalid("action must be 'retry' or 'discard'") from None
    occurred_at = _aware(occurred_at, "occurred_at")
    _check_times(kind, occurred_at, retry_at, deadline)
    return Resolution(
        command_id,
        instance_id,
        work_id,
        token,
        kind,
        actor,
        reason,
        occurred_at,
        None if retry_at is None else utc(retry_at),
        None if deadline is None else utc(deadline),
    )


def retry_window(
    now: datetime, retry_at: datetime | None = None, deadline: datetime | None = None
) -> tuple[datetime, datetime]:
    """A retry's (retry_at, deadline) from what its operator gave, the rest by default
    (``DEFAULT_RETRY_IN`` after ``now``, ``DEFAULT_DEADLINE_IN`` after the retry), so
    every caller defaults alike. WorkRequestInvalid when the retry is more than
    MAX_RETRY_IN after ``now`` or the deadline more than MAX_DEADLINE_IN after the
    retry (``make_resolution`` checks their order)."""
    now = _aware(now, "now")
    retry_at = now + DEFAULT_RETRY_IN if retry_at is None else _aware(retry_at, "retry_at")
    deadline = retry_at + DEFAULT_DEADLINE_IN if deadline is None else _aware(deadline, "deadline")
    if retry_at - now > MAX_RETRY_IN:
        raise WorkRequestInvalid(
            f"the retry must be due at most {MAX_RETRY_IN.days} days from now (MAX_RETRY_IN)"
        )
    if deadline - retry_at > MAX_DEADLINE_IN:
        raise WorkRequestInvalid(
            f"the new deadline must be at most {MAX_DEADLINE_IN.days} days after the retry is due "
            "(MAX_DEADLINE_IN)"
        )
    return retry_at, deadline


def _check_key(value: object, what: str) -> None:
    """A stored id (the dead letter's key as listed): a string of bounded length."""
    if not isinstance(value, str) or not 1 <= len(value) <= 2 * MAX_KEY_LENGTH:
        raise WorkRequestInvalid(f"{what} must be 1 to {2 * MAX_KEY_LENGTH} characters")


def _check_times(
    action: ResolutionAction,
    occurred_at: datetime,
    retry_at: datetime | None,
    deadline: datetime | None,
) -> None:
    if action is ResolutionAction.DISCARD:
        if retry_at is not None or deadline is not None:
            raise WorkRequestInvalid("a discard takes neither retry_at nor deadline")
        return
    if retry_at is None or deadline is None:
        raise WorkRequestInvalid("a retry needs both retry_at and a new deadline")
    retry_at = _aware(retry_at, "retry_at")
    if retry_at < occurred_at:
        raise WorkRequestInvalid("the retry must be due now or later, not in the past")
    if _aware(deadline, "deadline") <= retry_at:
        raise WorkRequestInvalid("the new deadline must be after the retry is due")


async def resolve(store: Store, command: Resolution) -> ResolutionResult:
    """Resolve the dead letter (work_id, token) once, in one transaction; ``command``
    comes from ``make_resolution``, which has checked every field.

    A committed command given again is success with ``replayed=True``: exactly, or
    later with other times (``Resolution.repeats``; ``recorded`` then has the first
    one's). Raises ResolutionConflict (command id or fence used by another command),
    StaleLease (the token is not the work's current dead letter) or, when the COMMIT's
    answer was lost, CommitUnknown: send the same command again to learn the outcome.
    """
    now = store.clock.sql_now()

    async def body(conn: psycopg.AsyncConnection) -> bool:
        return await _resolve_on(conn, command, now, store.channel)

    try:
        replayed = await transact(store, f"resolution {command.command_id}", body)
    except ResolutionConflict:
        earlier = await find_resolution(store, command.instance_id, command.command_id)
        if earlier is None or not command.repeats(earlier):
            raise
        return ResolutionResult(command.command_id, True, earlier)
    return ResolutionResult(command.command_id, replayed, command)


async def _resolve_on(
    conn: psycopg.AsyncConnection, command: Resolution, now: datetime | None, channel: str
) -> bool:
    """The resolution's statements in order; True for an exact replay (nothing written)."""
    if await _replayed(conn, command):
        return True
    fence = {"instance": command.instance_id, "work": command.work_id, "token": command.token}
    if await (await conn.execute(sql.LOCK_DEAD_LETTER, fence)).fetchone() is None:
        if await _replayed(conn, command):  # our own command committed meanwhile
            return True
        raise StaleLease(
            f"work {command.work_id} has no dead letter with token {command.token}: it was "
            "resolved, reclaimed or never dead-lettered"
        )
    inserted = await (
        await conn.execute(sql.INSERT_RESOLUTION, _resolution_row(command))
    ).fetchone()
    if inserted is None:
        if await _replayed(conn, command):
            return True
        raise ResolutionConflict(
            f"dead letter {command.work_id} (token {command.token}) was already resolved "
            "by another command"
        )
    if command.action is ResolutionAction.RETRY:
        readmit = {**fence, "retry_at": command.retry_at, "deadline": command.deadline}
        (due,) = await (
            await conn.execute(sql.READMIT_DEAD_LETTER, {**readmit, "now": now})
        ).fetchone()
        if due:
            await conn.execute(transition_sql.NOTIFY_WORK, {"channel": channel})
    return False


async def _replayed(conn: psycopg.AsyncConnection, command: Resolution) -> bool:
    """True if this exact command is recorded; ResolutionConflict if its id holds another."""
    key = {"instance": command.instance_id, "command": command.command_id}
    row = await (await conn.execute(sql.RESOLUTION_BY_COMMAND, key)).fetchone()
    if row is None:
        return False
    if row[0] != command.fingerprint:
        raise ResolutionConflict(
            f"command {command.command_id} was already used for a different resolution"
        )
    return True


def _resolution_row(command: Resolution) -> dict[str, Any]:
    return {
        "instance": command.instance_id,
        "command": command.command_id,
        "fingerprint": command.fingerprint,
        "work": command.work_id,
        "token": command.token,
        "action": ACTION_CODES[command.action],
        "actor": command.actor,
        "reason": command.reason,
        "occurred_at": command.occurred_at,
        "retry_at": command.retry_at,
        "deadline": command.deadline,
    }


def _aware(instant: datetime, what: str) -> datetime:
    if not isinstance(instant, datetime) or instant.utcoffset() is None:
        raise WorkRequestInvalid(f"{what} must be an instant with a time zone")
    return utc(instant)


def _instant(instant: datetime | None) -> str | None:
    return None if instant is None else format_instant(instant)
