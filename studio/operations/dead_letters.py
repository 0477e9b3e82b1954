"""A team's dead letters: triage by failure code and definition version, and resolving
them one at a time or in bulk, each with its own audited outcome.

A dead letter is work the engine gave up on (its deadline passed, or a processor
refused it). Resolving it is a fenced, audited command
(``Client.resolve_dead_letter``): retry (readmit at a time, with a new deadline) or
discard, with the actor and a required reason, at most once per fence. A bulk resolution is
the same command per item, so each item gets its own result (done, already done by
this very command, or refused and why), never one verdict for the lot. Command ids
derive from the id the form carried, so posting the same form twice changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from engine import (
    CommitUnknown,
    ResolutionConflict,
    StaleLease,
    WorkRequestInvalid,
    make_resolution,
)
from engine.api.queries import (
    DeadLetter,
    DeadLetterCursor,
    DeadLetterGroup,
    ResolutionAction,
    ResolutionRecord,
)
from engine.model import limits
from engine.model.canonical import digest
from engine.model.definitions import DefinitionRef
from engine.model.durations import ALLOWED, format_duration, parse_duration
from engine.model.limits import MAX_DEADLINE_IN, MAX_PAGE_ITEMS, MAX_RETRY_IN
from studio.errors import Invalid
from studio.paging import format_cursor, parse_cursor
from studio.reasons import operator_reason
from studio.runtime import Runtime

PAGE_SIZE = 50
AUDIT_SHOWN = 20
DEFAULT_RETRY_IN = f"{limits.DEFAULT_RETRY_IN.total_seconds():g}s"
"""The engine's default retry delay as the form writes it (``0s``: ``format_duration``
has no form for zero)."""
DEFAULT_DEADLINE_IN = format_duration(limits.DEFAULT_DEADLINE_IN)


@dataclass(frozen=True)
class DeadLetterView:
    item: DeadLetter
    definition: DefinitionRef | None

    @property
    def group(self) -> tuple[str, str]:
        """(failure code, ``name@version``): the triage group this dead letter is in."""
        version = f"{self.definition.name}@{self.definition.version}" if self.definition else "?"
        return self.item.failure_code, version


@dataclass(frozen=True)
class DeadLetterPage:
    items: list[DeadLetterView]
    next_cursor: str
    groups: list[DeadLetterGroup]
    audit: list[ResolutionRecord]
    code: str

    def grouped(self) -> list[tuple[tuple[str, str], list[DeadLetterView]]]:
        """The page's items by group, groups in the order they first appear."""
        found: dict[tuple[str, str], list[DeadLetterView]] = {}
        for view in self.items:
            found.setdefault(view.group, []).append(view)
        return list(found.items())


async def page(
    runtime: Runtime, team: str, code: str = "", cursor: str | None = None
) -> DeadLetterPage:
    """One page of the team's unresolved dead letters (of one failure code when given)."""
    after_pair = parse_cursor(cursor)
    after = DeadLetterCursor(*after_pair) if after_pair else None
    queries = runtime.queries
    found = await queries.dead_letters(after, PAGE_SIZE, tenant=team, failure_code=code or None)
    rows = await queries.instance_rows({d.instance_id for d in found.items})
    items = [
        DeadLetterView(d, rows[d.instance_id].definition if d.instance_id in rows else None)
        for d in found.items
    ]
    following = found.next_cursor
    return DeadLetterPage(
        items,
        format_cursor((following.failed_at, following.work_id)) if following else "",
        await queries.dead_letter_groups(tenant=team),
        await queries.recent_resolutions(tenant=team, limit=AUDIT_SHOWN),
        code,
    )


# Resolving ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fence:
    """A dead letter as a resolution names it: the work by its key (the stored instance
    id and the work id, as the list shows them) and the token it failed under."""

    instance_id: str
    work_id: str
    token: int

    @classmethod
    def parse(cls, text: str) -> Fence:
        """``<token>:<instance id> <work id>`` (ids may contain ``:``, tokens may not;
        neither contains a space)."""
        token, sep, key = text.partition(":")
        instance_id, space, work_id = key.partition(" ")
        if not sep or not token.isdigit() or not space or not instance_id or not work_id:
            raise Invalid(f"{text!r} does not name a dead letter")
        return cls(instance_id, work_id, int(token))

    @property
    def key(self) -> tuple[str, str]:
        """The work row's key: (instance id, work id)."""
        return self.instance_id, self.work_id

    def __str__(self) -> str:
        return f"{self.token}:{self.instance_id} {self.work_id}"


@dataclass(frozen=True)
class Resolution:
    """What to do with the chosen dead letters, as the form or the API says it."""

    action: str
    reason: str
    command_id: str
    retry_in: str = DEFAULT_RETRY_IN
    deadline_in: str = DEFAULT_DEADLINE_IN


@dataclass(frozen=True)
class ItemResult:
    work_id: str
    token: int
    instance_id: str
    ok: bool
    outcome: str
    """retried, discarded, unchanged (this command had done it already), refused or
    unknown (the answer to its commit was lost: ``LOST_ANSWER``)."""
    message: str = ""


def _times(resolution: Resolution, now: datetime) -> tuple[datetime | None, datetime | None]:
    if resolution.action == ResolutionAction.DISCARD:
        return None, None
    retry_in = _within(resolution.retry_in or DEFAULT_RETRY_IN, "retry_in", MAX_RETRY_IN)
    deadline_in = _within(
        resolution.deadline_in or DEFAULT_DEADLINE_IN, "deadline_in", MAX_DEADLINE_IN
    )
    if deadline_in <= timedelta(0):
        raise Invalid.at("deadline_in", "the new deadline must be after the retry: more than 0s")
    retry_at = now + retry_in
    return retry_at, retry_at + deadline_in


DURATION_FIELDS = {"retry_in": "retry after", "deadline_in": "the new deadline"}
"""The resolution's durations, by the field that holds each (in the form and the API),
with the words its refusal names it by."""


def _within(text: str, field: str, limit: timedelta) -> timedelta:
    """The duration ``text`` of ``field``; Invalid at that field, saying what is
    allowed, unless it is one of at most ``limit``."""
    rule = f"{DURATION_FIELDS[field]} must be a duration of at most {format_duration(limit)}"
    try:
        value = parse_duration(text.strip())
    except ValueError:
        raise Invalid.at(field, f"{rule} ({ALLOWED})") from None
    if value > limit:
        raise Invalid.at(field, f"{rule} ({ALLOWED}), not {text.strip()}")
    return value


def _check(resolution: Resolution, fences: list[Fence]) -> ResolutionAction:
    try:
        action = ResolutionAction(resolution.action)
    except ValueError:
        raise Invalid.at("action", "action is retry or discard") from None
    operator_reason(resolution.reason)
    if not resolution.command_id:
        raise Invalid("the form carries no command id; reload the page")
    check_item_count(len(fences))
    return action


def check_item_count(count: int) -> None:
    """Invalid unless 1 to MAX_PAGE_ITEMS dead letters are chosen (checked before the
    API reads anything for them)."""
    if not count:
        message = f"no dead letter was chosen: choose 1 to {MAX_PAGE_ITEMS} to resolve"
        raise Invalid.at("items", message)
    if count > MAX_PAGE_ITEMS:
        raise Invalid.at("items", f"at most {MAX_PAGE_ITEMS} dead letters at a time")


LOST_ANSWER = (
    "the answer to its commit was lost, so it may or may not be resolved: it is resolved "
    "unless the list still shows it (the token of a dead letter is resolved at most once)"
)
"""An item whose resolution's outcome is unknown. Nothing can act on it twice: a
resolution names the dead letter's fencing token, and the same form again replays
its own command (``item_command_id``)."""


def item_command_id(command_id: str, fence: Fence) -> str:
    """One command id per item, derived from the form's, so a repeat post is a replay."""
    return f"{command_id}.{digest([fence.work_id, fence.token])[:16]}"


async def resolve(
    runtime: Runtime, team: str, actor: str, fences: list[Fence], resolution: Resolution
) -> list[ItemResult]:
    """Resolve each fence on its own; the results say, per item, what happened."""
    action = _check(resolution, fences)
    now = runtime.queries.now()
    retry_at, deadline = _times(resolution, now)
    rows = await runtime.queries.work_rows([f.key for f in fences])
    results = []
    for fence in fences:
        row = rows.get(fence.key)
        if row is None or row.tenant_id != team:
            missing = ItemResult(fence.work_id, fence.token, "", False, "refused", "not found")
            results.append(missing)
            continue
        results.append(
            await _resolve_one(
                runtime, fence, row.instance_id, action, actor, resolution, now, retry_at, deadline
            )
        )
    runtime.watcher.nudge()
    return results


async def _resolve_one(
    runtime: Runtime,
    fence: Fence,
    instance_id: str,
    action: ResolutionAction,
    actor: str,
    resolution: Resolution,
    now: datetime,
    retry_at: datetime | None,
    deadline: datetime | None,
) -> ItemResult:
    done = "retried" if action is ResolutionAction.RETRY else "discarded"
    command_id = item_command_id(resolution.command_id, fence)
    try:
        command = make_resolution(
            command_id,
            fence.instance_id,
            fence.work_id,
            fence.token,
            action,
            actor,
            resolution.reason.strip(),
            now,
            retry_at,
            deadline,
        )
        outcome = await runtime.client.resolve_dead_letter(command)
    except CommitUnknown:
        return ItemResult(fence.work_id, fence.token, instance_id, False, "unknown", LOST_ANSWER)
    except (StaleLease, ResolutionConflict) as refused:
        return await _refused(runtime, fence, instance_id, command_id, refused)
    except WorkRequestInvalid as refused:
        return ItemResult(fence.work_id, fence.token, instance_id, False, "refused", str(refused))
    if outcome.replayed:
        return _unchanged(fence, instance_id)
    return ItemResult(fence.work_id, fence.token, instance_id, True, done)


def _unchanged(fence: Fence, instance_id: str) -> ItemResult:
    message = "this form had already resolved it"
    return ItemResult(fence.work_id, fence.token, instance_id, True, "unchanged", message)


async def _refused(
    runtime: Runtime, fence: Fence, instance_id: str, command_id: str, error: Exception
) -> ItemResult:
    """A refused item: the same form posted again (its own command acted before, at
    another time), or someone else resolved or reclaimed the work meanwhile."""
    earlier = await runtime.queries.resolution(instance_id, command_id)
    if earlier is not None and (earlier.work_id, earlier.token) == (fence.work_id, fence.token):
        return _unchanged(fence, instance_id)
    if isinstance(error, StaleLease):
        message = "no longer a dead letter with this token (resolved or reclaimed)"
    else:
        message = str(error)
    return ItemResult(fence.work_id, fence.token, instance_id, False, "refused", message)
