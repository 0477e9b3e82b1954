"""How replay folds a code-first run's events, and the journal entries it gives the code.

Every command the code reached is a ``JournalRecord`` in the order its event was
recorded (``Instance.journal``); what it resolved to is kept where the other modes keep
the same thing: a step's attempts in ``activities`` (its ``Step``, built from the options
its event carries, in ``dynamic_steps``), a sleep in ``timers``, a spawned run in
``children``, a wait in ``waits``. Signals fill an ``inbox``, deduplicated by id and
bounded by ``MAX_INBOX_SIGNALS``; a wait consumes the oldest unconsumed signal of a
name it awaits, and an unconsumed extra stays set aside (buttons get clicked twice).

``entries(state)`` turns the journal into the ``Entry`` values the driver replays the
code against: each with its state (open, done, failed) and the value the verb returns.
"""

from __future__ import annotations

import json
from typing import Any

from engine.model.deferred import with_entry
from engine.model.events import Event, EventKind
from engine.model.frozen import evolve
from engine.model.instance import (
    AttemptProgress,
    AttemptStatus,
    AuditEntry,
    ChildStatus,
    InboxSignal,
    Instance,
    InstanceStatus,
    JournalRecord,
    WaitEntry,
    WaitProgress,
)
from engine.model.registry import Registry
from engine.modes import FoldRule
from engine.modes.code import records
from engine.modes.code.cursor import MAX_JOURNAL_COMMANDS
from engine.modes.code.failures import failed_text
from engine.modes.code.journal import Entry, EntryState, Verb
from engine.modes.steps import fold as steps_fold
from engine.modes.steps.fold import activities, children, waits
from engine.replay.rules import reject, require_status

K = EventKind
S = InstanceStatus
A = AttemptStatus
MAX_INBOX_SIGNALS = 1_000
"""Signals one run keeps (consumed or set aside): a run is not a message queue."""
VALUE_VERBS = frozenset({Verb.NOW, Verb.RANDOM, Verb.UUID4})
WAIT_VERBS = frozenset({Verb.WAIT, Verb.RACE, Verb.ALL})
BY_SIGNAL, BY_SPAWN, BY_TIMEOUT = "signal", "spawn", "timeout"
ENDED_CHILD = frozenset({ChildStatus.SUCCEEDED, ChildStatus.FAILED, ChildStatus.START_FAILED})


def _data(event: Event) -> dict[str, Any]:
    value = event.value()
    if not isinstance(value, dict):
        raise reject(event, f"{event.kind.label} data must be a JSON object")
    return value


def _record(
    state: Instance, event: Event, verb: Verb, name: str = "", occurrence: int = 1, **extra: Any
) -> Instance:
    """``state`` with the command ``event`` records appended to its journal."""
    require_status(state, event, S.RUNNING)
    if len(state.journal) >= MAX_JOURNAL_COMMANDS:
        raise reject(event, f"a run records at most {MAX_JOURNAL_COMMANDS} commands")
    if _taken(state, verb, event.step):
        raise reject(event, f"command {event.step!r} is already recorded")
    record = JournalRecord(
        len(state.journal), verb.value, event.step, name, occurrence, event.sequence, **extra
    )
    return evolve(state, journal=(*state.journal, record))


def _taken(state: Instance, verb: Verb, key: str) -> bool:
    """Whether a command keyed ``key`` is recorded: looked up where its verb keeps its
    progress (a journal of 10,000 commands is not scanned for each one it records)."""
    if verb in (Verb.STEP, Verb.SPAWN):
        return key in state.dynamic_steps
    if verb is Verb.SLEEP:
        return key in state.timers
    if verb in WAIT_VERBS:
        return key in state.waits
    return any(r.key == key for r in state.journal if r.verb == verb)


def _occurrence(event: Event) -> int:
    """The number ending a key (``sleep.2`` -> 2)."""
    try:
        return int(event.step.rsplit(".", 1)[1])
    except (IndexError, ValueError):
        raise reject(event, f"{event.step!r} is not a journal key") from None


def schedule_step(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    data = _data(event)
    try:
        options = records.options_of(data)
        name, occurrence = str(data["name"]), int(data["occurrence"])
    except (KeyError, TypeError, ValueError):
        raise reject(event, "a code step's data names its name, occurrence and options") from None
    step = records.step_of(event.step, options, records.target_of(state.definition))
    new = _record(state, event, Verb.STEP, name, occurrence)
    new = evolve(new, dynamic_steps=with_entry(state.dynamic_steps, event.step, step))
    return activities.schedule_activity(new, event, registry, command)


def schedule_sleep(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    if not event.step.startswith(f"{Verb.SLEEP.value}."):
        raise reject(event, f"{event.step!r} is not a sleep")
    return waits.with_timer(_record(state, event, Verb.SLEEP, "", _occurrence(event)), event)


def schedule_spawn(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    assert event.definition is not None
    new = _record(state, event, Verb.SPAWN, event.definition.name, _occurrence(event))
    step = records.spawn_step(event.step, event.definition)
    new = evolve(new, dynamic_steps=with_entry(state.dynamic_steps, event.step, step))
    return children.schedule_child(new, event, registry, command)


def record_value(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    verb = next((v for v in VALUE_VERBS if event.step.startswith(f"{v.value}.")), None)
    if verb is None:
        raise reject(event, f"{event.step!r} is not a journaled value (now, random, uuid4)")
    return _record(state, event, verb, "", _occurrence(event), value=event.data)


def start_wait(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    data = _data(event)
    try:
        verb = Verb(data["verb"])
        on = tuple(str(item) for item in data["on"])
        timeout = records.from_micros(data["timeout"])
        name = str(data.get("name", ""))
    except (KeyError, TypeError, ValueError):
        raise reject(event, "wait_started data names verb, awaited names, timeout") from None
    if verb not in WAIT_VERBS or not on:
        raise reject(event, "a wait is a wait_signal, race or all of at least one name")
    if (timeout is None) != (event.due_at is None):
        raise reject(event, "a wait has a due_at exactly when it has a timeout")
    if timeout is not None and event.due_at != event.occurred_at + timeout:
        raise reject(event, "due_at must be the time plus the wait's timeout")
    new = _record(state, event, verb, name, _occurrence(event), on=on)
    wait = WaitProgress(event.step, verb.value, on, event.sequence, timeout, event.due_at)
    return evolve(new, waits=with_entry(state.waits, event.step, wait))


def resolve_wait(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    require_status(state, event, S.RUNNING)
    wait = state.waits.get(event.step)
    if wait is None or wait.done:
        raise reject(event, f"{event.step!r} is not an open wait")
    data = _data(event)
    try:
        index, by, name = int(data["index"]), str(data["by"]), str(data["name"])
        signal_id = str(data.get("signal_id", ""))
    except (KeyError, TypeError, ValueError):
        raise reject(event, "wait_resolved data names the entry, its name and how") from None
    expected = len(wait.resolved) if wait.verb == Verb.ALL else 0
    if index != expected or index >= len(wait.on):
        raise reject(event, f"the next entry of {event.step!r} to resolve is {expected}")
    if by == BY_TIMEOUT:
        if wait.due_at is None or event.occurred_at < wait.due_at:
            raise reject(event, f"{event.step!r} has not timed out")
        if wait.verb != Verb.RACE and name != wait.on[index]:
            raise reject(event, f"entry {index} of {event.step!r} is {wait.on[index]!r}")
        entry = WaitEntry(index, name, by, event.sequence)
    else:
        allowed = wait.on if wait.verb == Verb.RACE else (wait.on[index],)
        if name not in allowed:
            raise reject(event, f"{event.step!r} does not await {name!r} at entry {index}")
        entry, state = _resolved_by(state, event, wait, index, by, name, signal_id)
    done = wait.verb != Verb.ALL or index + 1 == len(wait.on)
    if done and event.due_at is not None:
        raise reject(event, "a wait that is done has no due_at")
    if not done and wait.timeout is not None and event.due_at != event.occurred_at + wait.timeout:
        raise reject(event, "the next entry's due_at is the time plus the wait's timeout")
    resolved = evolve(
        wait, resolved=(*wait.resolved, entry), done=done, due_at=None if done else event.due_at
    )
    return evolve(state, waits=with_entry(state.waits, event.step, resolved))


def _resolved_by(
    state: Instance, event: Event, wait: WaitProgress, index: int, by: str, name: str, sid: str
) -> tuple[WaitEntry, Instance]:
    """The entry a signal (consumed here) or a spawned run's end resolves."""
    if by == BY_SPAWN:
        child = state.children.get(name)
        if child is None or child.status not in ENDED_CHILD:
            raise reject(event, f"spawned run {name!r} has not ended")
        return WaitEntry(index, name, by, event.sequence, data=child.result), state
    if by != BY_SIGNAL:
        raise reject(event, "a wait entry resolves by a signal, a spawn or a timeout")
    for position, signal in enumerate(state.inbox):
        if signal.signal_id == sid and signal.name == name and not signal.consumed_by:
            inbox = list(state.inbox)
            inbox[position] = evolve(signal, consumed_by=wait.key)
            entry = WaitEntry(index, name, by, event.sequence, signal_id=sid, data=signal.data)
            return entry, evolve(state, inbox=tuple(inbox))
    raise reject(event, f"signal {sid!r} of {name!r} is not in the inbox unconsumed")


def receive_signal(
    state: Instance, event: Event, registry: Registry, command: AuditEntry | None
) -> Instance:
    """A signal joins the inbox while the run runs or is paused (buffered)."""
    require_status(state, event, S.RUNNING, S.PAUSED)
    if any(s.signal_id == event.idempotency_key for s in state.inbox):
        raise reject(event, f"signal {event.idempotency_key!r} was already received")
    if len(state.inbox) >= MAX_INBOX_SIGNALS:
        raise reject(event, f"a run keeps at most {MAX_INBOX_SIGNALS} signals")
    signal = InboxSignal(
        event.step, event.idempotency_key, event.occurred_at, event.sequence, event.data
    )
    return evolve(state, inbox=(*state.inbox, signal))


RULES: dict[EventKind, FoldRule] = {
    **steps_fold.RULES,
    K.ACTIVITY_SCHEDULED: schedule_step,
    K.TIMER_SCHEDULED: schedule_sleep,
    K.TIMER_FIRED: waits.fire_timer,
    K.CHILD_SCHEDULED: schedule_spawn,
    K.SIGNAL_RECEIVED: receive_signal,
    K.WAIT_STARTED: start_wait,
    K.WAIT_RESOLVED: resolve_wait,
    K.VALUE_RECORDED: record_value,
}
"""A code-first run's rules: the step lists' attempt and child rules (over its dynamic
steps), and its own for what it records as commands, signals and waits."""


# Entries ------------------------------------------------------------------------------


def entries(state: Instance) -> tuple[Entry, ...]:
    """The journal as the driver replays it: each command, resolved or open."""
    return tuple(entry_of(state, record) for record in state.journal)


def entry_of(state: Instance, record: JournalRecord) -> Entry:
    verb = Verb(record.verb)
    status, value, failure = _resolution(state, verb, record)
    return Entry(
        position=record.position,
        verb=verb,
        key=record.key,
        name=record.name,
        sequence=record.sequence,
        state=status,
        value=value,
        failure=failure,
        on=record.on,
        occurrence=record.occurrence,
    )


def _resolution(state: Instance, verb: Verb, record: JournalRecord) -> tuple[EntryState, Any, str]:
    if verb is Verb.STEP:
        return _step(state, record)
    if verb is Verb.SLEEP:
        timer = state.timers[record.key]
        return (EntryState.OPEN if timer.fired_at is None else EntryState.DONE), None, ""
    if verb in WAIT_VERBS:
        wait = state.waits[record.key]
        if not wait.done:
            return EntryState.OPEN, None, ""
        failed = spawn_failure(state, wait)
        return (
            (EntryState.FAILED, None, failed) if failed else (EntryState.DONE, wait_value(wait), "")
        )
    if verb is Verb.SPAWN:  # the handle is usable at once; its end resolves waits on it
        return EntryState.DONE, None, ""
    return EntryState.DONE, _json(record.value), ""


def _step(state: Instance, record: JournalRecord) -> tuple[EntryState, Any, str]:
    progress = state.activities[record.key]
    if progress.status is A.SUCCEEDED:
        return EntryState.DONE, _json(progress.result), ""
    if final_failure(state, progress):
        text = failed_text(record.name, progress.attempt, _reason(progress))
        return EntryState.FAILED, None, text
    return EntryState.OPEN, None, ""


def final_failure(state: Instance, progress: AttemptProgress) -> bool:
    """A step failed for good: a known failure no retry follows (not retryable, or its
    attempts used up)."""
    step = state.step(progress.step)
    assert step is not None and step.retry is not None
    return progress.status is A.FAILED and (
        not progress.retryable or progress.attempt >= step.retry.max_attempts
    )


def _reason(progress: AttemptProgress) -> str:
    """The failure's message as the body gave it (``StepFailure('declined')``), or its code."""
    detail = _json(progress.result)
    if isinstance(detail, dict) and isinstance(detail.get("message"), str):
        return detail["message"]
    return progress.code


def spawn_failure(state: Instance, wait: WaitProgress) -> str:
    """Why a wait that is done raises into the code ('' when it returns): an entry it
    gives the code is a spawned run that did not complete (it failed, was cancelled or
    terminated, or never started). Such a run has no result, and giving the code None
    for it, as for a timeout, let an order with a failed line item complete as if the
    line had been packed; the code now gets ``StepFailed`` (which it may catch), naming
    the run and how it ended. A race raises only when its winner is such a run."""
    given = wait.resolved if wait.verb == Verb.ALL else wait.resolved[:1]
    for entry in given:
        if entry.by != BY_SPAWN:
            continue
        child = state.children.get(entry.name)
        if child is not None and child.status is not ChildStatus.SUCCEEDED:
            how = child.code or child.status.label
            return f"spawned run '{entry.name}' ({child.definition.name}) did not complete: {how}"
    return ""


def wait_value(wait: WaitProgress) -> Any:
    """What a wait that is done returns: a payload, ``[payload, name]``, or payloads."""
    values = [_json(entry.data) for entry in wait.resolved]
    if wait.verb == Verb.WAIT:
        return values[0]
    if wait.verb == Verb.RACE:
        (entry,) = wait.resolved
        return None if entry.by == BY_TIMEOUT else [values[0], entry.name]
    return values


def _json(text: str | None) -> Any:
    return None if text is None else json.loads(text)
