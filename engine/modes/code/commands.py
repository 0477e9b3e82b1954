"""Recording what a replay of the code asked for: its new commands, then how it ended.

Each new command becomes its event (``records``) and the work that resolves it:

- a step: ``activity_scheduled`` keyed ``charge.1``, and ACTIVITY work whose idempotency
  key is the step's ``step_id`` (``order-saga/o-42/charge#1.1``): the key every attempt
  of that effect carries, unchanged across a crash (a redelivery is an unknown outcome
  with the same key), new after a known failure;
- a sleep: ``timer_scheduled`` and TIMER work due when it ends;
- a wait, race or all: ``wait_started`` (due when its first entry times out); it may
  resolve at once from the inbox (``waits``, in the decision that follows);
- a spawn: ``child_scheduled`` pinned to the definition's latest published version,
  and CHILD work that starts it (``<run>/spawn.1``);
- ``now``/``random``/``uuid4``: ``value_recorded``, the value the code was given.

Then: a code that returned completes the run with its value; a code that raised fails
it, unwinding its compensations first when a compensated step succeeded; a code that
continued as new ends the run in favour of its successor (``continuation``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from engine.decide import decisions, lifecycle
from engine.model.canonical import canonical_json
from engine.model.definitions import DefinitionRef
from engine.model.errors import InputRefused
from engine.model.events import EventKind, json_data
from engine.model.limits import WORK_CLAIM_WINDOW
from engine.model.transitions import Draft, WorkKind
from engine.modes.code import continuation, records
from engine.modes.code.decide import decision_work
from engine.modes.code.journal import Command, ContinuedAsNew, Raised, Returned, Verb, Waits
from engine.modes.code.step_ids import step_id
from engine.modes.steps.orchestration import compensable

K = EventKind
WORKFLOW_STEP = "workflow"
"""The ``step`` of a failure that no step of the journal names (the code's own error)."""
MAX_NEW_COMMANDS = 40
"""Commands one decision records (a loop may spawn hundreds before it blocks): the
rest are recorded by the next decision, which replays past these, so a transition
stays within ``MAX_TRANSITION_EVENTS``."""
RESULT_NOT_JSON = "result-not-json"
INPUT_NOT_JSON = "spawn-input-not-json"
CONTINUATION_NOT_JSON = "continuation-input-not-json"
SUCCESSOR_ID_REFUSED = "successor-id-refused"
"""A run continued as new whose successor's id cannot be one (too long)."""


class NotJson(Exception):
    """A spawn's input is not JSON."""


class SpawnUnresolved(Exception):
    """A spawn names a definition whose published version the caller must look up."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def record(
    draft: Draft,
    advance: Waits | Returned | Raised | ContinuedAsNew,
    spawns: Mapping[str, DefinitionRef],
) -> None:
    """Append the advance's new commands and its ending to ``draft`` (see the module);
    ``spawns`` pins the definitions new runs start on (a spawn's, a continuation's) by
    name (SpawnUnresolved names a missing one)."""
    try:
        for command in advance.new[:MAX_NEW_COMMANDS]:
            _record_command(draft, command, spawns)
    except NotJson:
        fail(draft, INPUT_NOT_JSON, "a spawned run's input is not JSON")
        return
    if len(advance.new) > MAX_NEW_COMMANDS:  # the rest in the next decision, at once
        decision_work(draft, draft.now, "more")
        return
    if isinstance(advance, Returned):
        try:
            value = json.loads(canonical_json(advance.value))
        except (TypeError, ValueError):
            fail(draft, RESULT_NOT_JSON, "the workflow returned a value that is not JSON")
            return
        lifecycle.complete(draft, value)
    elif isinstance(advance, Raised):
        fail(draft, advance.code, advance.message)
    elif isinstance(advance, ContinuedAsNew):
        _continue(draft, advance, spawns)


def _continue(draft: Draft, advance: ContinuedAsNew, spawns: Mapping[str, DefinitionRef]) -> None:
    """End the run continued as new on its workflow's latest published version."""
    state = draft.state
    assert state is not None
    name = state.definition.name
    latest = spawns.get(name)
    if latest is None:
        raise SpawnUnresolved(name)
    try:
        input = json.loads(canonical_json(advance.input))
    except (TypeError, ValueError):
        fail(
            draft,
            CONTINUATION_NOT_JSON,
            "the workflow continued as new with an input that is not JSON",
        )
        return
    try:
        continuation.record(draft, input, latest)
    except InputRefused as refused:  # its id would be too long
        fail(draft, SUCCESSOR_ID_REFUSED, str(refused))


def fail(draft: Draft, code: str, message: str) -> None:
    """End the run failed with ``code``; unwind its compensations first if any."""
    state = draft.state
    assert state is not None
    step = state.journal[-1].key if state.journal else WORKFLOW_STEP
    data = json_data({"message": message})
    kind = K.INSTANCE_FAILING if compensable(state) else K.FAILED
    draft.add(kind, step=step, code=code, data=data)


def _record_command(draft: Draft, command: Command, spawns: Mapping[str, DefinitionRef]) -> None:
    verb, key = command.verb, command.key
    if verb is Verb.STEP:
        key_id = step_id(draft.instance_id, command.name, command.occurrence)
        decisions.schedule_activity(draft, key, records.step_data(command), key=key_id)
    elif verb is Verb.SLEEP:
        assert command.timeout is not None
        due = draft.now + command.timeout
        event = draft.add(K.TIMER_SCHEDULED, step=key, due_at=due)
        work_id = "#".join([draft.instance_id, str(event.sequence), WorkKind.TIMER.label, key])
        draft.add_work(work_id, WorkKind.TIMER, event, due, due + WORK_CLAIM_WINDOW, {"step": key})
    elif verb in (Verb.WAIT, Verb.RACE, Verb.ALL):
        due = None if command.timeout is None else draft.now + command.timeout
        data = canonical_json(records.wait_data(command))
        draft.add(K.WAIT_STARTED, step=key, data=data, due_at=due)
    elif verb is Verb.SPAWN:
        ref = spawns.get(command.name)
        if ref is None:
            raise SpawnUnresolved(command.name)
        decisions.schedule_child(draft, key, _json_value(command.input), ref)
    else:
        draft.add(K.VALUE_RECORDED, step=key, data=canonical_json(command.value))


def _json_value(value: Any) -> Any:
    """A spawn's input as JSON (NotJson when it is not)."""
    try:
        return json.loads(canonical_json(value))
    except (TypeError, ValueError):
        raise NotJson from None
